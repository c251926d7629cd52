-- Speed-of-light time of every layer group (block template) of every model × deployment × workload.
with

ops as (
    select *
    from op_sol
),

nodes as (
    select
        model,
        uid,
        template
    from base_nodes
),

summed as (
    select
        o.model,
        o.deployment,
        o.workload,
        any_value(o.phase) as phase,
        n.template,
        sum(o.flops) as flops,
        sum(o.bytes) as bytes,
        sum(o.comm_bytes) as comm_bytes,
        sum(o.compute_s) as compute_s,
        sum(o.memory_s) as memory_s,
        sum(o.comm_s) as comm_s,
        sum(o.time_s) as time_s
    from ops as o
    left join nodes as n on n.model = o.model and n.uid = o.uid
    group by o.model, o.deployment, o.workload, n.template
)

select
    model,
    deployment,
    workload,
    phase,
    template,
    flops,
    bytes,
    comm_bytes,
    compute_s,
    memory_s,
    comm_s,
    time_s
from summed
