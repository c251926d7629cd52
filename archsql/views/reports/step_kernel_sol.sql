-- A step's speed of light as each framework version launches it (kernel_sol summed), next to
-- the primitive-by-primitive step (op_sol summed): what the fusion rules save.
with

fused as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        any_value(phase) as phase,
        sum(time_s) as time_s,
        sum(saved_bytes) as saved_bytes,
        count(*) filter (where len(fused_by) > 0) as fused_ops
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
    f.model,
    f.deployment,
    f.workload,
    f.framework,
    f.version,
    f.phase,
    f.time_s,
    u.time_s as unfused_time_s,
    f.saved_bytes,
    f.fused_ops
from fused as f
inner join unfused as u on u.model = f.model and u.deployment = f.deployment and u.workload = f.workload
