-- A step of every model × deployment × workload as each framework version launches it, with
-- measured kernel times where the corpus has the launched kernel and speed-of-light times
-- elsewhere (measured_vs_kernels summed), and its coverage: the share of the step's
-- speed-of-light time whose kernels are measured.
with

kernels as (
    select
        model,
        deployment,
        gpu,
        workload,
        phase,
        framework,
        version,
        policy,
        sol_s,
        measured_s,
        time_s,
        matched
    from measured_vs_kernels
)

select
    model,
    deployment,
    any_value(gpu) as gpu,
    workload,
    any_value(phase) as phase,
    framework,
    version,
    policy,
    sum(sol_s) as sol_s,
    sum(time_s) as time_s,
    coalesce(sum(measured_s), 0) as measured_s,
    coalesce(sum(sol_s) filter (where matched), 0) as sol_of_measured_s,
    coalesce(sum(sol_s) filter (where matched), 0) / nullif(sum(sol_s), 0) as coverage,
    coalesce(sum(measured_s), 0) / nullif(sum(time_s), 0) as measured_share,
    count(*) filter (where matched) as kernels_measured,
    count(*) as kernels
from kernels
group by model, deployment, workload, framework, version, policy
