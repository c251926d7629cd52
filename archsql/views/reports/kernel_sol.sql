-- Speed of light of every op as a framework version launches it (fusion_hits launched on the
-- deployment): op_sol's row with the HBM bytes a fused kernel does not move taken off, and
-- the kernel the op runs in.  For every edge X → Y inside a chain or a region, Y's read of X's
-- output, and X's write of it when nothing outside the kernel reads it; for siblings (a merged GEMM), every
-- member but the first no longer reads the shared input.  Per edge instance
-- (int_fusion_edges), the bytes of one pass of the tensor per device
-- (int_device_op_values.output_bytes per instance), times the forwards the op runs per step
-- (op_sol.runs: k per decode step for a drafting deployment's MTP layers).
with

ops as (
    select *
    from op_sol
),

hits as (
    select
        model,
        deployment,
        phase,
        framework,
        version,
        rule,
        pattern,
        kernel,
        input_uid,
        members
    from fusion_hits
    where launched and not call
),

-- the call (several kernels measured as one: a fused-MoE call) each node belongs to
calls as (
    select
        h.model,
        h.deployment,
        h.phase,
        h.framework,
        h.version,
        m.uid,
        min(h.members[1]) as call_uid
    from fusion_hits as h
    cross join unnest(h.members) as m(uid)
    where h.launched and h.call
    group by h.model, h.deployment, h.phase, h.framework, h.version, m.uid
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

edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        instances
    from int_fusion_edges
),

consumers as (
    select
        model,
        phase,
        src_uid as uid,
        count(distinct dst_uid) as readers
    from int_fusion_graph
    group by model, phase, src_uid
),

-- the edges inside every launched chain or region: both ends members
member_of as (
    select
        h.model,
        h.phase,
        h.deployment,
        h.framework,
        h.version,
        h.rule,
        h.members,
        m.uid
    from hits as h
    cross join unnest(h.members) as m(uid)
    where h.pattern in ('chain', 'region')
),

links as (
    select
        a.model,
        a.phase,
        a.deployment,
        a.framework,
        a.version,
        a.rule,
        a.members,
        e.src_uid,
        e.dst_uid,
        e.instances
    from member_of as a
    inner join edges as e on e.model = a.model and e.phase = a.phase and e.src_uid = a.uid
    inner join member_of as b
        on
            b.model = a.model and b.phase = a.phase and b.deployment = a.deployment and b.framework = a.framework
            and b.version = a.version and b.rule = a.rule and b.members = a.members and b.uid = e.dst_uid
),

-- a producer whose every reader is inside its group writes nothing out
inside as (
    select
        l.model,
        l.phase,
        l.deployment,
        l.framework,
        l.version,
        l.rule,
        l.members,
        l.src_uid,
        count(distinct l.dst_uid) = any_value(c.readers) as all_inside
    from links as l
    inner join consumers as c on c.model = l.model and c.phase = l.phase and c.uid = l.src_uid
    group by l.model, l.phase, l.deployment, l.framework, l.version, l.rule, l.members, l.src_uid
),

-- bytes a member no longer moves: (member, tensor, passes) per launched group — for every
-- internal edge X → Y, Y's read of X's output, and X's write of it when no reader is outside
chain_saves as (
    select
        l.model, l.phase, l.deployment, l.framework, l.version, l.rule,
        l.src_uid as tensor_uid,
        l.dst_uid as uid,
        l.instances as passes
    from links as l
    union all
    select
        l.model, l.phase, l.deployment, l.framework, l.version, l.rule,
        l.src_uid as tensor_uid,
        l.src_uid as uid,
        max(l.instances) as passes
    from links as l
    inner join inside as x
        on
            x.model = l.model and x.phase = l.phase and x.deployment = l.deployment and x.framework = l.framework
            and x.version = l.version and x.rule = l.rule and x.members = l.members and x.src_uid = l.src_uid
    where x.all_inside
    group by l.model, l.phase, l.deployment, l.framework, l.version, l.rule, l.members, l.src_uid
),

sibling_saves as (
    select
        h.model, h.phase, h.deployment, h.framework, h.version, h.rule,
        h.input_uid as tensor_uid,
        s.uid,
        e.instances as passes
    from hits as h
    cross join unnest(h.members[2:]) as s(uid)
    inner join edges as e on e.model = h.model and e.phase = h.phase and e.src_uid = h.input_uid and e.dst_uid = s.uid
    where h.pattern = 'siblings'
),

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
    inner join passes as p on p.model = s.model and p.deployment = s.deployment and p.uid = s.tensor_uid
    inner join base_workloads as w on w.workload = p.workload and w.phase = s.phase
    group by s.model, s.deployment, p.workload, s.framework, s.version, s.uid
),

-- the fused kernel each member of a launched chain or siblings group runs in: the group's
-- first member names it (a node in two groups of one rule — the residual add feeding the
-- next layer's norm and the final norm — joins the first)
fused_members as (
    select
        h.model,
        h.deployment,
        h.phase,
        h.framework,
        h.version,
        m.uid,
        min(h.members[1]) as kernel_uid,
        arg_min(h.kernel, h.members[1]) as kernel,
        arg_min(h.rule, h.members[1]) as rule
    from hits as h
    cross join unnest(h.members) as m(uid)
    where h.pattern <> 'node'
    group by h.model, h.deployment, h.phase, h.framework, h.version, m.uid
),

-- a node rule's kernel name (the MLA decode kernel, the DSA indexer's logits kernel)
named as (
    select
        model,
        deployment,
        phase,
        framework,
        version,
        input_uid as uid,
        min(kernel) as kernel,
        min(rule) as rule
    from hits
    where pattern = 'node'
    group by model, deployment, phase, framework, version, input_uid
),

-- the kernel a node runs in before fusion: a flash-attention kernel holds score, softmax and
-- apply (int_node_kernels), every other node its own
base_kernels as (
    select
        model,
        phase,
        uid,
        kernel_uid,
        op_kind
    from int_node_kernels
),

versions as (
    select distinct
        framework,
        version
    from base_fusion_rules
),

-- the launched kernel of every node a deployment runs, per framework version: the same at
-- every workload, so joined here (a few hundred thousand rows) and to the ops once
nodes as (
    select distinct
        model,
        deployment,
        phase,
        uid
    from ops
),

launched as (
    select
        n.model,
        n.deployment,
        n.phase,
        n.uid,
        v.framework,
        v.version,
        -- the launched kernel: the fused group of the node, else of its flash-attention
        -- kernel's anchor, else that kernel (else the node itself: below)
        coalesce(f.kernel_uid, fa.kernel_uid, b.kernel_uid) as kernel_uid,
        coalesce(f.kernel, fa.kernel, nm.kernel, na.kernel, b.op_kind) as kernel,
        coalesce(f.rule, fa.rule, nm.rule, na.rule) as rule,
        c.call_uid
    from nodes as n
    cross join versions as v
    left join base_kernels as b on b.model = n.model and b.phase = n.phase and b.uid = n.uid
    left join fused_members as f
        on f.model = n.model and f.deployment = n.deployment and f.phase = n.phase
        and f.framework = v.framework and f.version = v.version and f.uid = n.uid
    left join fused_members as fa
        on fa.model = n.model and fa.deployment = n.deployment and fa.phase = n.phase
        and fa.framework = v.framework and fa.version = v.version and fa.uid = b.kernel_uid and b.kernel_uid <> n.uid
    left join named as nm
        on nm.model = n.model and nm.deployment = n.deployment and nm.phase = n.phase
        and nm.framework = v.framework and nm.version = v.version and nm.uid = n.uid
    left join calls as c
        on c.model = n.model and c.deployment = n.deployment and c.phase = n.phase
        and c.framework = v.framework and c.version = v.version and c.uid = n.uid
    left join named as na
        on na.model = n.model and na.deployment = n.deployment and na.phase = n.phase
        and na.framework = v.framework and na.version = v.version and na.uid = b.kernel_uid and b.kernel_uid <> n.uid
),

fused as (
    select
        o.model,
        o.deployment,
        o.workload,
        k.framework,
        k.version,
        o.phase,
        o.uid,
        o.op,
        o.role,
        o.flops,
        o.bytes - coalesce(s.saved_bytes, 0) * o.runs as bytes,
        coalesce(s.saved_bytes, 0) * o.runs as saved_bytes,
        coalesce(s.fused_by, []) as fused_by,
        o.comm_bytes,
        o.compute_s,
        -- op_sol's memory time scaled to the bytes the fused kernel moves (one bandwidth source)
        case when o.bytes > 0 then o.memory_s * (o.bytes - coalesce(s.saved_bytes, 0) * o.runs) / o.bytes else o.memory_s end
            as memory_s,
        o.comm_s,
        o.time_s as unfused_time_s,
        coalesce(k.kernel_uid, o.uid) as kernel_uid,
        coalesce(k.kernel, o.op) as kernel,
        k.rule,
        k.call_uid
    from ops as o
    inner join launched as k
        on k.model = o.model and k.deployment = o.deployment and k.phase = o.phase and k.uid = o.uid
    left join saved as s
        on s.model = o.model and s.deployment = o.deployment and s.workload = o.workload
        and s.framework = k.framework and s.version = k.version and s.uid = o.uid
)

select
    model,
    deployment,
    workload,
    framework,
    version,
    phase,
    uid,
    op,
    role,
    flops,
    bytes,
    saved_bytes,
    fused_by,
    comm_bytes,
    compute_s,
    memory_s,
    comm_s,
    greatest(coalesce(compute_s, 0), memory_s, coalesce(comm_s, 0)) as time_s,
    kernel_uid,
    kernel,
    rule,
    unfused_time_s,
    call_uid
from fused
