-- GPU figures in base units, one row per GPU and compute dtype.
with

gpus as (
    select
        gpu,
        memory_capacity,
        memory_capacity_unit,
        device_memory_MiB,
        mem_bandwidth_TBps,
        bf16_fp16_dense_tflops,
        fp8_dense_tflops,
        fp4_dense_tflops,
        scaleup_bw_GBps,
        scaleup_bw_direction,
        scaleup_domain_gpus,
        scaleout_nic_per_gpu_Gbps
    from base_gpus
),

converted as (
    select
        gpu,
        device_memory_MiB * 1048576.0 as device_memory_bytes,
        memory_capacity * case
            when memory_capacity_unit like 'GiB%' then 1073741824.0
            when memory_capacity_unit like 'MiB%' then 1048576.0
            else 1e9
        end as marketed_memory_bytes,
        mem_bandwidth_TBps * 1e12 as hbm_bytes_per_s,
        scaleup_bw_GBps * 1e9
        / case when scaleup_bw_direction like 'bidirectional%' then 2.0 else 1.0 end as link_bytes_per_s,
        scaleout_nic_per_gpu_Gbps * 1e9 / 8 as scaleout_bytes_per_s,
        scaleup_domain_gpus,
        bf16_fp16_dense_tflops * 1e12 as bf16_flops,
        fp8_dense_tflops * 1e12 as fp8_flops,
        fp4_dense_tflops * 1e12 as fp4_flops
    from gpus
),

-- the capacity the device exposes (nvidia-smi MiB) where a report was found, else the marketed figure
capacity as (
    select
        *,
        coalesce(device_memory_bytes, marketed_memory_bytes) as memory_bytes,
        case when device_memory_bytes is null then 'marketed' else 'device' end as memory_basis,
        coalesce(abs(device_memory_bytes - marketed_memory_bytes) > 0.01 * marketed_memory_bytes, false)
            as memory_disagrees
    from converted
),

per_dtype as (
    select
        gpu, 'bf16' as dtype, bf16_flops as peak_flops_per_s, memory_bytes, marketed_memory_bytes, memory_basis, memory_disagrees,
        hbm_bytes_per_s, link_bytes_per_s,         scaleout_bytes_per_s, scaleup_domain_gpus
    from capacity
    union all
    select
        gpu, 'fp16' as dtype, bf16_flops as peak_flops_per_s, memory_bytes, marketed_memory_bytes, memory_basis, memory_disagrees,
        hbm_bytes_per_s, link_bytes_per_s,         scaleout_bytes_per_s, scaleup_domain_gpus
    from capacity
    union all
    select
        gpu, 'fp8' as dtype, fp8_flops as peak_flops_per_s, memory_bytes, marketed_memory_bytes, memory_basis, memory_disagrees,
        hbm_bytes_per_s, link_bytes_per_s,         scaleout_bytes_per_s, scaleup_domain_gpus
    from capacity
    union all
    select
        gpu, 'fp4' as dtype, fp4_flops as peak_flops_per_s, memory_bytes, marketed_memory_bytes, memory_basis, memory_disagrees,
        hbm_bytes_per_s, link_bytes_per_s,         scaleout_bytes_per_s, scaleup_domain_gpus
    from capacity
)

select
    gpu,
    dtype,
    peak_flops_per_s,
    memory_bytes,
    marketed_memory_bytes,
    memory_basis,
    memory_disagrees,
    hbm_bytes_per_s,
    link_bytes_per_s,
    scaleout_bytes_per_s,
    scaleup_domain_gpus
from per_dtype
