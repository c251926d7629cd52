-- Step time of every model × deployment × workload × policy with measured kernel times where
-- the corpus has them and speed-of-light times elsewhere (measured_vs_sol summed): prefill
-- time to first token, decode time per output token, and how much of it is measured.
with

kernels as (
    select
        model,
        deployment,
        gpu,
        workload,
        phase,
        policy,
        framework,
        op_kind,
        sol_s,
        measured_s,
        time_s,
        matched,
        status,
        library,
        library_version
    from measured_vs_sol
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
        gpus
    from base_deployments
),

summed as (
    select
        model,
        deployment,
        any_value(gpu) as gpu,
        workload,
        any_value(phase) as phase,
        policy,
        framework,
        sum(sol_s) as sol_s,
        sum(time_s) as time_s,
        coalesce(sum(measured_s), 0) as measured_s,
        coalesce(sum(sol_s) filter (where matched), 0) as sol_of_measured_s,
        count(*) filter (where matched) as kernels_measured,
        count(*) filter (where status = 'no measurement') as kernels_unmeasured,
        count(*) filter (where status = 'no kernel signature') as kernels_without_signature,
        coalesce(sum(sol_s) filter (where status = 'no measurement'), 0) as sol_unmeasured_s,
        coalesce(sum(sol_s) filter (where status = 'no kernel signature'), 0) as sol_without_signature_s,
        string_agg(distinct library || ' ' || library_version, ', ' order by library || ' ' || library_version)
            as measured_with
    from kernels
    group by model, deployment, workload, policy, framework
)

select
    s.model,
    s.deployment,
    s.gpu,
    d.gpus,
    s.workload,
    s.phase,
    w.batch,
    w.new_tokens,
    w.context,
    s.policy,
    s.framework,
    s.sol_s,
    s.time_s,
    s.measured_s,
    s.sol_of_measured_s,
    s.measured_s / nullif(s.time_s, 0) as measured_share,
    s.measured_s / nullif(s.sol_of_measured_s, 0) as measured_over_sol,
    s.time_s / nullif(s.sol_s, 0) as time_over_sol,
    s.kernels_measured,
    s.kernels_unmeasured,
    s.kernels_without_signature,
    s.sol_unmeasured_s,
    s.sol_without_signature_s,
    case when s.phase = 'prefill' then s.time_s end as ttft_s,
    case when s.phase = 'decode' then s.time_s end as tpot_s,
    w.batch * w.new_tokens / nullif(s.time_s, 0) as tokens_per_s,
    w.batch * w.new_tokens / nullif(s.time_s, 0) / d.gpus as tokens_per_s_per_gpu,
    s.measured_with
from summed as s
inner join workloads as w on w.workload = s.workload
inner join deployments as d on d.deployment = s.deployment
