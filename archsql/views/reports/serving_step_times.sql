-- The time of each step a serving case runs: every op of the step (op_sol) at the fitted
-- efficiency of its GPU generation — max(compute / compute efficiency, memory / memory
-- efficiency, link / comm efficiency) — summed, plus the framework's per-step overhead.
with

steps as (
    select distinct
        model,
        deployment,
        framework,
        prefill_workload as workload
    from int_serving_steps
    union
    select distinct
        model,
        deployment,
        framework,
        decode_workload as workload
    from int_serving_steps
),

generations as (
    select
        gpu,
        generation
    from serving_gpu_generations
),

constants as (
    select
        constant,
        applies_to,
        value
    from serving_constants
),

ops as (
    select
        o.model,
        o.deployment,
        o.workload,
        d.gpu,
        coalesce(o.compute_s, 0) as compute_s,
        o.memory_s,
        o.comm_s,
        o.time_s
    from op_sol as o
    inner join base_deployments as d on d.deployment = o.deployment
    where exists (
        select 1 from steps as s
        where s.model = o.model and s.deployment = o.deployment and s.workload = o.workload
    )
),

priced as (
    select
        o.model,
        o.deployment,
        o.workload,
        o.time_s,
        greatest(o.compute_s / ce.value, o.memory_s / me.value, o.comm_s / le.value) as estimated_s
    from ops as o
    inner join generations as g on g.gpu = o.gpu
    inner join constants as ce on ce.constant = 'compute_efficiency' and ce.applies_to = g.generation
    inner join constants as me on me.constant = 'memory_efficiency' and me.applies_to = g.generation
    inner join constants as le on le.constant = 'comm_efficiency' and le.applies_to = g.generation
),

summed as (
    select
        model,
        deployment,
        workload,
        sum(time_s) as sol_s,
        sum(estimated_s) as ops_s
    from priced
    group by model, deployment, workload
)

select
    s.model,
    s.deployment,
    s.framework,
    s.workload,
    t.sol_s,
    t.ops_s,
    oh.value as overhead_s,
    t.ops_s + oh.value as time_s
from steps as s
inner join summed as t on t.model = s.model and t.deployment = s.deployment and t.workload = s.workload
inner join constants as oh on oh.constant = 'step_overhead_s' and oh.applies_to = s.framework
