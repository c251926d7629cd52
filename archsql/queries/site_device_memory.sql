-- Per-device memory of every model × deployment × workload by part (weights, KV, activations, reserve), with the fit verdict.
with
memory as (
    select
        model, deployment, workload, stage, batch, context, weight_bytes, kv_bytes, activation_bytes,
        memory_bytes - usable_bytes as reserve_bytes, total_bytes, usable_bytes, memory_bytes, fits
    from device_memory
),

parts as (
    unpivot memory
    on weight_bytes as 'weights', kv_bytes as 'kv', activation_bytes as 'activations', reserve_bytes as 'reserve'
    into name part value bytes
)

select
    model,
    deployment,
    workload,
    stage,
    batch,
    context,
    part,
    bytes,
    total_bytes,
    usable_bytes,
    memory_bytes,
    fits
from parts
order by model, deployment, workload, stage, part
