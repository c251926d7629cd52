-- The time of each step a serving case runs: every op of the step (op_sol) at the fitted
-- constants of its GPU generation — max(compute / compute efficiency, memory / memory
-- efficiency, link / comm efficiency + a collective's latency, a kernel's floor), the compute
-- and memory terms of a routed-expert op (role ffn_moe) further over the MoE efficiency, the latency
-- and the floor once per launch (the layers the op runs in × its runs per step) — summed, plus
-- the framework's per-step overhead.  An op of no work (a softmax inside flash attention) has
-- no launch of its own.  A prefill step runs without a CUDA graph (eager): each launch costs the
-- host the framework's eager_launch_s, and a kernel shorter than that waits for the host, so
-- the floor of a prefill op is its launches × max(kernel floor, eager launch).
with

steps as (
    -- the prefill step on the deployment that runs it (disaggregated: the prefill pool's)
    select distinct
        model,
        prefill_deployment as deployment,
        framework,
        prefill_workload as workload,
        true as eager
    from int_serving_steps
    union
    -- the decode step of the batch a rank runs (serving_admission)
    select distinct
        s.model,
        s.deployment,
        s.framework,
        a.running_workload as workload,
        false as eager
    from int_serving_steps as s
    inner join serving_admission as a on a.serving_case = s.serving_case
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

-- the layers a node runs in: its template's (a node outside a repeated stack runs once), and
-- whether it is a routed-expert (MoE) op, whose kernels run at their own efficiency
layers as (
    select
        n.model,
        n.uid,
        n.role = 'ffn_moe' as moe,
        coalesce(t.layers, 1) as layers
    from base_nodes as n
    left join int_template_layers as t on t.model = n.model and t.stack = n.stack and t.template = n.template
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
        o.time_s,
        case when o.time_s > 0 then coalesce(l.layers, 1) * o.runs else 0 end as launches,
        coalesce(l.moe, false) as moe,
        s.framework,
        s.eager
    from op_sol as o
    inner join base_deployments as d on d.deployment = o.deployment
    inner join steps as s on s.model = o.model and s.deployment = o.deployment and s.workload = o.workload
    left join layers as l on l.model = o.model and l.uid = o.uid
),

priced as (
    select
        o.model,
        o.deployment,
        o.framework,
        o.workload,
        o.time_s,
        greatest(
            o.compute_s / ce.value / case when o.moe then moe.value else 1 end,
            o.memory_s / me.value / case when o.moe then moe.value else 1 end,
            o.comm_s / le.value + case when o.comm_s > 0 then o.launches * cl.value else 0 end,
            o.launches * case when o.eager then greatest(kf.value, el.value) else kf.value end
        ) as estimated_s
    from ops as o
    inner join generations as g on g.gpu = o.gpu
    inner join constants as ce on ce.constant = 'compute_efficiency' and ce.applies_to = g.generation
    inner join constants as me on me.constant = 'memory_efficiency' and me.applies_to = g.generation
    inner join constants as le on le.constant = 'comm_efficiency' and le.applies_to = g.generation
    inner join constants as cl on cl.constant = 'comm_latency_s' and cl.applies_to = g.generation
    inner join constants as kf on kf.constant = 'kernel_floor_s' and kf.applies_to = g.generation
    inner join constants as moe on moe.constant = 'moe_efficiency' and moe.applies_to = g.generation
    inner join constants as el on el.constant = 'eager_launch_s' and el.applies_to = o.framework
),

summed as (
    select
        model,
        deployment,
        framework,
        workload,
        sum(time_s) as sol_s,
        sum(estimated_s) as ops_s
    from priced
    group by model, deployment, framework, workload
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
inner join summed as t
    on t.model = s.model and t.deployment = s.deployment and t.framework = s.framework and t.workload = s.workload
inner join constants as oh on oh.constant = 'step_overhead_s' and oh.applies_to = s.framework
