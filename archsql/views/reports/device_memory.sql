-- Memory of one device of every deployment for every model and workload, and whether it fits.
with

deployments as (
    select
        deployment,
        gpu,
        weight_dtype,
        kv_dtype,
        usable_memory_fraction
    from base_deployments
),

gpus as (
    select
        gpu,
        memory_bytes
    from int_gpu_specs
    where dtype = 'bf16'
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

weights as (
    select
        model,
        deployment,
        sum(elements) as elements
    from int_device_weights
    where in_base_model
    group by model, deployment
),

caches as (
    select
        model,
        deployment,
        workload,
        sum(cache_bytes) as bytes
    from int_device_op_values
    group by model, deployment, workload
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
        w.batch,
        w.context,
        coalesce(wt.elements, 0) * wd.bytes as weight_bytes,
        coalesce(c.bytes, 0) as kv_bytes,
        g.memory_bytes * d.usable_memory_fraction as usable_bytes,
        g.memory_bytes
    from models as m
    cross join deployments as d
    cross join workloads as w
    inner join gpus as g on g.gpu = d.gpu
    inner join dtypes as wd on wd.dtype = d.weight_dtype
    left join weights as wt on wt.model = m.model and wt.deployment = d.deployment
    left join caches as c on c.model = m.model and c.deployment = d.deployment and c.workload = w.workload
),

fitted as (
    select
        model,
        deployment,
        workload,
        batch,
        context,
        weight_bytes,
        kv_bytes,
        weight_bytes + kv_bytes as total_bytes,
        usable_bytes,
        memory_bytes,
        weight_bytes + kv_bytes <= usable_bytes as fits,
        greatest(weight_bytes + kv_bytes - usable_bytes, 0) as shortfall_bytes,
        case
            when weight_bytes >= usable_bytes then 0
            when kv_bytes = 0 then null
            else floor((usable_bytes - weight_bytes) / (kv_bytes / batch))
        end as max_batch
    from joined
)

select
    model,
    deployment,
    workload,
    batch,
    context,
    weight_bytes,
    kv_bytes,
    total_bytes,
    usable_bytes,
    memory_bytes,
    fits,
    shortfall_bytes,
    max_batch
from fitted
