-- Speed-of-light step time of every model × deployment × workload split by what bounds each op (compute, memory, comm).
select
    o.model,
    o.deployment,
    o.workload,
    o.phase,
    o.bound,
    count(*) as ops,
    sum(o.time_s) as time_s
from op_sol as o
group by o.model, o.deployment, o.workload, o.phase, o.bound
order by o.model, o.deployment, o.workload, o.bound
