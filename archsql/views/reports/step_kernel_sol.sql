-- A step's speed of light as each framework version launches it (launched_kernels summed),
-- next to the primitive-by-primitive step (op_sol summed): what the fusion rules save.
with

kernels as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        any_value(phase) as phase,
        sum(time_s) as time_s,
        sum(saved_bytes) as saved_bytes,
        count(*) as kernels,
        count(*) filter (where fused) as fused_kernels
    from launched_kernels
    group by model, deployment, workload, framework, version
),

fused_ops as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        count(*) filter (where array_length(fused_by) > 0) as fused_ops
    from kernel_sol
    group by model, deployment, workload, framework, version
),

unfused as (
    select
        model,
        deployment,
        workload,
        sum(time_s) as time_s
    from op_sol
    group by model, deployment, workload
)

select
    k.model,
    k.deployment,
    k.workload,
    k.framework,
    k.version,
    k.phase,
    k.time_s,
    u.time_s as unfused_time_s,
    k.saved_bytes,
    f.fused_ops,
    k.kernels,
    k.fused_kernels
from kernels as k
inner join unfused as u on u.model = k.model and u.deployment = k.deployment and u.workload = k.workload
inner join fused_ops as f
    on f.model = k.model and f.deployment = k.deployment and f.workload = k.workload
    and f.framework = k.framework and f.version = k.version
