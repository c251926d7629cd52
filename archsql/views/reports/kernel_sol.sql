-- Speed of light of every op as a framework version launches it (fusion_matches applied):
-- op_sol's row with the HBM bytes a fused kernel does not move taken off — for a chain A → B,
-- B's read of A's output, and A's write of it when nothing outside the kernel reads it; for
-- siblings (a merged GEMM), every member but the first no longer reads the shared input.  Per
-- edge instance (int_fusion_edges), the bytes of one pass of A's output per device
-- (int_device_op_values.output_bytes per instance).  A rule applies where its conditions hold
-- (tp_min, phase; a launch flag is never set: the deployments have none yet).
with

ops as (
    select *
    from op_sol
),

matches as (
    select *
    from fusion_matches
),

rules as (
    select
        framework,
        version,
        rule,
        tp_min,
        phase,
        flag
    from base_fusion_rules
),

degrees as (
    select
        deployment,
        tp
    from int_deployment_degrees
),

-- one pass of a node's output on one device (all its instances' output over its instances)
passes as (
    select
        v.model,
        v.deployment,
        v.workload,
        v.uid,
        v.output_bytes / i.count as pass_bytes
    from int_device_op_values as v
    inner join base_instances as i on i.model = v.model and i.uid = v.uid
),

consumers as (
    select
        model,
        phase,
        src_uid as uid,
        count(distinct dst_uid) as readers
    from base_edges
    where src_uid is not null
    group by model, phase, src_uid
),

-- the framework versions whose conditions hold for a deployment at a workload
applied as (
    select
        m.*,
        d.deployment
    from matches as m
    inner join rules as r on r.framework = m.framework and r.version = m.version and r.rule = m.rule
    cross join degrees as d
    where (r.tp_min is null or d.tp >= r.tp_min) and (r.phase is null or r.phase = m.phase) and r.flag is null
),

-- bytes a member no longer moves: (member, saved) per match
chain_saves as (
    select
        a.model, a.phase, a.deployment, a.framework, a.version, a.rule, a.input_uid,
        a.members[2] as uid,
        e.instances as passes
    from applied as a
    inner join int_fusion_edges as e
        on e.model = a.model and e.phase = a.phase and e.src_uid = a.members[1] and e.dst_uid = a.members[2]
    where a.pattern = 'chain'
    union all
    select
        a.model, a.phase, a.deployment, a.framework, a.version, a.rule, a.input_uid,
        a.members[1] as uid,
        e.instances as passes
    from applied as a
    inner join int_fusion_edges as e
        on e.model = a.model and e.phase = a.phase and e.src_uid = a.members[1] and e.dst_uid = a.members[2]
    inner join consumers as c on c.model = a.model and c.phase = a.phase and c.uid = a.members[1]
    where a.pattern = 'chain' and c.readers = 1
),

sibling_saves as (
    select
        a.model, a.phase, a.deployment, a.framework, a.version, a.rule, a.input_uid,
        s.uid,
        e.instances as passes
    from applied as a
    cross join unnest(a.members[2:]) as s(uid)
    inner join int_fusion_edges as e
        on e.model = a.model and e.phase = a.phase and e.src_uid = a.input_uid and e.dst_uid = s.uid
    where a.pattern = 'siblings'
),

-- the pass saved is of the tensor the kernel keeps internal (input_uid): the chain's
-- producer output, the siblings' shared input
saves as (
    select * from chain_saves
    union all
    select * from sibling_saves
),

saved as (
    select
        s.model,
        s.deployment,
        p.workload,
        s.framework,
        s.version,
        s.uid,
        sum(s.passes * p.pass_bytes) as saved_bytes,
        list(distinct s.rule order by s.rule) as fused_by
    from saves as s
    inner join passes as p on p.model = s.model and p.deployment = s.deployment and p.uid = s.input_uid
    inner join base_workloads as w on w.workload = p.workload and w.phase = s.phase
    group by s.model, s.deployment, p.workload, s.framework, s.version, s.uid
),

versions as (
    select distinct
        framework,
        version
    from rules
),

fused as (
    select
        o.model,
        o.deployment,
        o.workload,
        v.framework,
        v.version,
        o.phase,
        o.uid,
        o.op,
        o.role,
        o.flops,
        o.bytes - coalesce(s.saved_bytes, 0) as bytes,
        coalesce(s.saved_bytes, 0) as saved_bytes,
        coalesce(s.fused_by, []) as fused_by,
        o.comm_bytes,
        o.compute_s,
        -- op_sol's memory time scaled to the bytes the fused kernel moves (one bandwidth source)
        case when o.bytes > 0 then o.memory_s * (o.bytes - coalesce(s.saved_bytes, 0)) / o.bytes else o.memory_s end
            as memory_s,
        o.comm_s
    from ops as o
    cross join versions as v
    left join saved as s
        on s.model = o.model and s.deployment = o.deployment and s.workload = o.workload
        and s.framework = v.framework and s.version = v.version and s.uid = o.uid
)

select
    *,
    greatest(coalesce(compute_s, 0), memory_s, coalesce(comm_s, 0)) as time_s
from fused
