-- Largest batch that fits per device memory of every model × deployment at each decode context, and what limits it.
select
    d.model,
    d.deployment,
    d.context,
    min(d.max_batch) as max_batch,
    arg_min(d.limited_by, d.max_batch) as limited_by
from device_memory as d
inner join base_workloads as w on w.workload = d.workload
where w.phase = 'decode'
group by d.model, d.deployment, d.context
having min(d.max_batch) >= 1
order by d.model, d.deployment, d.context
