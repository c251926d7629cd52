-- Speed of light of every op on one device, for every model × deployment × workload.
with

values_ as (
    select * exclude (cache_bytes, output_bytes) rename (hbm_bytes as bytes)
    from int_device_op_values
),

deployments as (
    select
        deployment,
        gpu,
        weight_dtype
    from base_deployments
),

gpus as (
    select
        gpu,
        dtype,
        peak_flops_per_s,
        hbm_bytes_per_s,
        link_bytes_per_s,
        scaleout_bytes_per_s
    from int_gpu_specs
),

priced as (
    select
        v.*,
        case
            when v.comm_bytes = 0 then null
            when v.scaleout_bytes = 0 then 'scale-up'
            when v.scaleout_bytes >= v.comm_bytes * (1 - 1e-12) then 'scale-out'
            else 'both'
        end as link,
        v.flops / g.peak_flops_per_s as compute_s,
        v.bytes / g.hbm_bytes_per_s as memory_s,
        -- the scale-up and scale-out parts of a collective move at the same time
        greatest(
            (v.comm_bytes - v.scaleout_bytes) / g.link_bytes_per_s,
            case when v.scaleout_bytes > 0 then v.scaleout_bytes / g.scaleout_bytes_per_s else 0 end
        ) as comm_s
    from values_ as v
    inner join deployments as d on d.deployment = v.deployment
    inner join gpus as g on g.gpu = d.gpu and g.dtype = d.weight_dtype
),

bounded as (
    select
        *,
        greatest(compute_s, memory_s, comm_s) as time_s,
        case
            when greatest(compute_s, memory_s, comm_s) = 0 then 'none'
            when comm_s >= compute_s and comm_s >= memory_s then 'comm'
            when compute_s >= memory_s then 'compute'
            else 'memory'
        end as bound,
        flops / nullif(bytes, 0) as arithmetic_intensity
    from priced
)

select
    model,
    deployment,
    workload,
    phase,
    uid,
    op,
    role,
    flops,
    bytes,
    comm_bytes,
    scaleout_bytes,
    link,
    compute_s,
    memory_s,
    comm_s,
    time_s,
    bound,
    arithmetic_intensity
from bounded
