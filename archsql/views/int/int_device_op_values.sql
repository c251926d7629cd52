-- Per-device quantities of every op at every workload: the op's terms evaluated (the one
-- place per-device terms meet workloads).  A routed expert node reads the weights of the
-- experts the step's tokens touch, in expectation under uniform routing: its local experts'
-- bytes times experts_touched(T, top_k, experts, local, 'uniform') / local, T the tokens the
-- device routes (batch × new tokens over the groups splitting the node's token axes).
with

-- ops and workloads get integer keys so that the large sum below groups on two integers (the
-- names are joined back once per result row)
workloads as (
    select
        dense_rank() over (order by workload, phase, batch, new_tokens, context) as workload_key,
        *
    from int_workload_inputs
),

terms as (
    select
        dense_rank() over (order by model, deployment, phase, uid) as op_key,
        *
    from int_device_op_terms
),

ops as (
    select
        op_key,
        any_value(model) as model,
        any_value(deployment) as deployment,
        any_value(phase) as phase,
        any_value(uid) as uid,
        any_value(op) as op,
        any_value(role) as role
    from terms
    group by op_key
),

-- routed expert nodes: experts per layer (the copies' parts), top_k (a token's share of the
-- copies, base_instances), the experts one device holds (the fit rule) and the groups
-- splitting the tokens it routes (the node's input, axes B and s)
routed as (
    select
        r.model,
        r.phase,
        r.uid,
        g.deployment,
        any_value(r.experts) as experts,
        any_value(r.top_k) as top_k,
        product(shard_local(r.experts, r.experts, null, g.degree)) as local_experts
    from int_routed_experts as r
    inner join int_deployment_groups as g on g."group" = r."group"
    group by r.model, r.phase, r.uid, g.deployment
),

token_divisors as (
    select
        l.model,
        l.phase,
        l.uid,
        g.deployment,
        product(shard_divisor(l.parts, l.segments, g.degree)) as divisor
    from base_layouts as l
    inner join int_deployment_groups as g on g."group" = l."group"
    where l.tensor = 'in0' and l.axis in (0, 1) and l.placement = 'S'
    group by l.model, l.phase, l.uid, g.deployment
),

term_values as (
    select
        t.op_key,
        w.workload_key,
        t.flops,
        t.hbm_bytes,
        t.comm_bytes,
        t.scaleout_bytes,
        t.cache_bytes,
        t.output_bytes,
        t.expert_weight_bytes,
        term_value(
            t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context,
            v := w.image_patches
        ) as value
    from terms as t
    inner join workloads as w on w.phase = t.phase
),

evaluated as (
    select
        op_key,
        workload_key,
        sum(flops * value) as flops,
        sum(hbm_bytes * value) as hbm_bytes,
        sum(comm_bytes * value) as comm_bytes,
        sum(scaleout_bytes * value) as scaleout_bytes,
        sum(cache_bytes * value) as cache_bytes,
        sum(output_bytes * value) as output_bytes,
        sum(expert_weight_bytes * value) as expert_weight_bytes
    from term_values
    group by op_key, workload_key
)

select
    o.model,
    o.deployment,
    w.workload,
    o.phase,
    o.uid,
    o.op,
    o.role,
    e.flops,
    e.hbm_bytes + case
        when e.expert_weight_bytes = 0 then 0
        else e.expert_weight_bytes * experts_touched(
            w.batch::double * w.new_tokens / coalesce(td.divisor, 1), r.top_k, r.experts, r.local_experts, 'uniform'
        ) / r.local_experts
    end as hbm_bytes,
    e.comm_bytes,
    e.scaleout_bytes,
    e.cache_bytes,
    e.output_bytes
from evaluated as e
inner join ops as o on o.op_key = e.op_key
inner join workloads as w on w.workload_key = e.workload_key
left join routed as r on r.model = o.model and r.phase = o.phase and r.uid = o.uid and r.deployment = o.deployment
left join token_divisors as td
    on td.model = o.model and td.phase = o.phase and td.uid = o.uid and td.deployment = o.deployment
