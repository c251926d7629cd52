-- GPU facts as published, with their sources and disagreement flags (parameter table).
-- A GPU with a figure parameter_checks flags (zero, negative) is left out.
select
    gpu,
    vendor,
    form_factor,
    memory_capacity,
    memory_capacity_unit,
    device_memory_MiB,
    device_memory_sources,
    memory_type,
    mem_bandwidth_TBps,
    bf16_fp16_dense_tflops,
    fp8_dense_tflops,
    fp4_dense_tflops,
    int8_dense_tops,
    tf32_dense_tflops,
    scaleup_interconnect,
    scaleup_bw_GBps,
    scaleup_bw_direction,
    scaleup_domain_gpus,
    scaleout_nic_per_gpu_Gbps,
    tdp_w,
    sources,
    flags
from gpus as t
where not exists (
    select 1 from lookup_checks as x where x.entity = 'gpu' and x.name = t.gpu
)
