-- Speed-of-light step time of every model × deployment × workload: the sum of its ops' times.
with

ops as (
    select *
    from op_sol
),

workloads as (
    select
        workload,
        batch,
        new_tokens,
        context
    from base_workloads
),

deployments as (
    select
        deployment,
        gpu,
        gpus
    from base_deployments as d
    where not exists (select 1 from deployment_checks as x where x.deployment = d.deployment)
),

max_context as (
    select
        model,
        value as max_context
    from base_dims
    where dim = 'max_context'
),

-- whether the step's memory fits one device, and by how much it does not (device_memory)
memory as (
    select
        model,
        deployment,
        workload,
        fits,
        shortfall_bytes
    from device_memory
),

summed as (
    select
        model,
        deployment,
        workload,
        any_value(phase) as phase,
        sum(compute_s) as compute_s,
        sum(memory_s) as memory_s,
        sum(comm_s) as comm_s,
        sum(time_s) as time_s
    from ops
    group by model, deployment, workload
),

joined as (
    select
        s.model,
        s.deployment,
        d.gpu,
        d.gpus,
        s.workload,
        s.phase,
        w.batch,
        w.new_tokens,
        w.context,
        s.compute_s,
        s.memory_s,
        s.comm_s,
        s.time_s,
        w.batch * w.new_tokens / nullif(s.time_s, 0) as tokens_per_s,
        w.batch * w.new_tokens / nullif(s.time_s, 0) / d.gpus as tokens_per_s_per_gpu,
        coalesce(w.context > m.max_context, false) as beyond_max_context,
        dm.fits,
        dm.shortfall_bytes
    from summed as s
    inner join workloads as w on w.workload = s.workload
    inner join deployments as d on d.deployment = s.deployment
    left join max_context as m on m.model = s.model
    left join memory as dm on dm.model = s.model and dm.deployment = s.deployment and dm.workload = s.workload
)

select
    model,
    deployment,
    gpu,
    gpus,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    compute_s,
    memory_s,
    comm_s,
    time_s,
    tokens_per_s,
    tokens_per_s_per_gpu,
    beyond_max_context,
    fits,
    shortfall_bytes
from joined
