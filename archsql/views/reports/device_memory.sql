-- Memory of one device of every deployment for every model and workload — weights as stored,
-- decode caches, the activation peak of the step — and whether it fits.
with

deployments as (
    select
        deployment,
        gpus
    from base_deployments as d
    where not exists (select 1 from deployment_checks as x where x.deployment = d.deployment)
),

-- the device's exposed memory and the usable fraction (the deployment's or its framework's)
memory as (
    select
        deployment,
        memory_fraction,
        memory_bytes,
        usable_bytes
    from int_deployment_memory
),

degrees as (
    select
        deployment,
        dp
    from int_deployment_degrees
),

-- the nodes whose weights each deployment holds: the base model, and the multi-token-
-- prediction stack where the deployment drafts with it, less its embedding and head (the
-- target model's tables, held once)
held as (
    select distinct
        model,
        deployment,
        uid
    from int_deployment_nodes
    where holds_weights
),

-- the pipeline stage of each node's copies (one stage, share 1, without pp)
shares as (
    select
        model,
        deployment,
        uid,
        stage,
        share
    from int_pipeline_shares
),

-- every stored tensor of the held nodes (data, scales, buffers) as a device of each stage holds it
weights as (
    select
        s.model,
        s.deployment,
        p.stage,
        sum(s.total_bytes * p.share) as bytes
    from int_device_storage as s
    inner join held as h on h.model = s.model and h.deployment = s.deployment and h.uid = s.uid
    inner join shares as p on p.model = s.model and p.deployment = s.deployment and p.uid = s.uid
    group by s.model, s.deployment, p.stage
),

caches as (
    select
        v.model,
        v.deployment,
        v.workload,
        p.stage,
        sum(v.cache_bytes * p.share) as bytes
    from int_device_op_values as v
    inner join shares as p on p.model = v.model and p.deployment = v.deployment and p.uid = v.uid
    group by v.model, v.deployment, v.workload, p.stage
),

stages as (
    select distinct
        model,
        deployment,
        stage
    from shares
),

activations as (
    select
        model,
        deployment,
        workload,
        peak_op,
        bytes
    from int_device_activations
),

workloads as (
    select
        workload,
        batch,
        context
    from base_workloads
),

models as (
    select model
    from base_models
),

joined as (
    select
        m.model,
        d.deployment,
        w.workload,
        st.stage,
        w.batch,
        w.context,
        wt.bytes as weight_bytes,
        coalesce(c.bytes, 0) as kv_bytes,
        coalesce(a.bytes, 0) as activation_bytes,
        a.peak_op as activation_peak_op,
        g.memory_fraction,
        g.usable_bytes,
        g.memory_bytes,
        d.gpus,
        dg.dp
    from models as m
    cross join deployments as d
    cross join workloads as w
    inner join memory as g on g.deployment = d.deployment
    inner join degrees as dg on dg.deployment = d.deployment
    inner join stages as st on st.model = m.model and st.deployment = d.deployment
    left join weights as wt on wt.model = m.model and wt.deployment = d.deployment and wt.stage = st.stage
    left join caches as c
        on c.model = m.model and c.deployment = d.deployment and c.workload = w.workload and c.stage = st.stage
    left join activations as a on a.model = m.model and a.deployment = d.deployment and a.workload = w.workload
),

fitted as (
    select
        model,
        deployment,
        workload,
        stage,
        batch,
        context,
        weight_bytes,
        kv_bytes,
        activation_bytes,
        activation_peak_op,
        weight_bytes + kv_bytes + activation_bytes as total_bytes,
        memory_fraction,
        usable_bytes,
        memory_bytes,
        gpus,
        dp,
        weight_bytes + kv_bytes + activation_bytes <= usable_bytes as fits,
        greatest(weight_bytes + kv_bytes + activation_bytes - usable_bytes, 0) as shortfall_bytes,
        -- caches and activations both grow linearly with the batch at this context and step
        case
            when weight_bytes >= usable_bytes then 0
            when kv_bytes + activation_bytes = 0 then null
            else floor((usable_bytes - weight_bytes) / ((kv_bytes + activation_bytes) / batch))
        end as max_batch,
        case
            when weight_bytes >= usable_bytes then 'weights'
            when kv_bytes + activation_bytes = 0 then null
            when kv_bytes >= activation_bytes then 'kv'
            else 'activations'
        end as limited_by
    from joined
),

-- a pipeline deployment fits when its fullest stage does; the batch is bounded by the stage
-- that runs out first
per_stage as (
    select
        *,
        row_number() over (partition by model, deployment, workload order by total_bytes desc, stage) as fullness,
        min(max_batch) over (partition by model, deployment, workload) as stage_max_batch,
        first(limited_by order by max_batch, stage) over (partition by model, deployment, workload) as stage_limited_by
    from fitted
),

fullest as (
    select
        * exclude (max_batch, limited_by, fullness, stage_max_batch, stage_limited_by),
        stage_max_batch as max_batch,
        stage_limited_by as limited_by
    from per_stage
    where fullness = 1
),

-- the deployment's max batch split over its attention data-parallel ranks (each rank holds
-- whole requests: floor(floor(x) / dp) = floor(x / dp)) and over all its GPUs
per_rank as (
    select
        *,
        floor(max_batch / dp) as max_batch_per_dp_rank,
        max_batch / gpus as max_batch_per_gpu
    from fullest
)

select
    model,
    deployment,
    workload,
    stage,
    batch,
    context,
    weight_bytes,
    kv_bytes,
    activation_bytes,
    activation_peak_op,
    total_bytes,
    memory_fraction,
    usable_bytes,
    memory_bytes,
    fits,
    shortfall_bytes,
    max_batch,
    max_batch_per_dp_rank,
    max_batch_per_gpu,
    limited_by
from per_rank
