-- Rows of the tables deployments name — gpus, dtypes, frameworks — that break a rule;
-- base_gpus, base_dtypes and base_frameworks leave them out (parameter_checks lists them).
with

gpu_rows as (
    select
        gpu,
        memory_capacity,
        device_memory_MiB,
        mem_bandwidth_TBps,
        bf16_fp16_dense_tflops,
        fp8_dense_tflops,
        fp4_dense_tflops,
        scaleup_bw_GBps,
        scaleup_domain_gpus,
        scaleout_nic_per_gpu_Gbps
    from gpus
),

gpu_figures as (
    select gpu, 'memory_capacity' as figure, memory_capacity::double as value from gpu_rows
    union all
    select gpu, 'device_memory_MiB' as figure, device_memory_MiB::double as value from gpu_rows
    union all
    select gpu, 'mem_bandwidth_TBps' as figure, mem_bandwidth_TBps::double as value from gpu_rows
    union all
    select gpu, 'bf16_fp16_dense_tflops' as figure, bf16_fp16_dense_tflops::double as value from gpu_rows
    union all
    select gpu, 'fp8_dense_tflops' as figure, fp8_dense_tflops::double as value from gpu_rows
    union all
    select gpu, 'fp4_dense_tflops' as figure, fp4_dense_tflops::double as value from gpu_rows
    union all
    select gpu, 'scaleup_bw_GBps' as figure, scaleup_bw_GBps::double as value from gpu_rows
    union all
    select gpu, 'scaleup_domain_gpus' as figure, scaleup_domain_gpus::double as value from gpu_rows
    union all
    select gpu, 'scaleout_nic_per_gpu_Gbps' as figure, scaleout_nic_per_gpu_Gbps::double as value from gpu_rows
),

gpu_problems as (
    select
        'gpus' as parameter_table,
        gpu as row_key,
        'gpu' as entity,
        gpu as name,
        'gpu figure' as rule,
        format('{} is {}', figure, value) as problem,
        'a published figure is positive (null: not published)' as fix
    from gpu_figures
    where value <= 0 or isnan(value)
    union all
    select
        'gpus' as parameter_table,
        gpu as row_key,
        'gpu' as entity,
        gpu as name,
        'gpu memory' as rule,
        'neither memory_capacity nor device_memory_MiB is given' as problem,
        'give the GPU''s memory' as fix
    from gpu_rows
    where memory_capacity is null and device_memory_MiB is null
),

dtype_problems as (
    select
        'dtypes' as parameter_table,
        dtype as row_key,
        'dtype' as entity,
        dtype as name,
        'dtype bytes' as rule,
        format('bytes {} per element', coalesce(bytes::varchar, 'null')) as problem,
        'bytes per element is positive (0.5 for a 4-bit type)' as fix
    from dtypes
    where bytes is null or not (bytes > 0)
),

framework_problems as (
    select
        'frameworks' as parameter_table,
        framework as row_key,
        'framework' as entity,
        framework as name,
        'memory fraction' as rule,
        format('default_fraction {} is outside (0, 1]', default_fraction) as problem,
        'use a fraction such as 0.9 (null: derived by the framework''s rule)' as fix
    from frameworks
    where default_fraction is not null and not (default_fraction > 0 and default_fraction <= 1)
),

problems as (
    select * from gpu_problems
    union all
    select * from dtype_problems
    union all
    select * from framework_problems
)

select
    parameter_table,
    row_key,
    entity,
    name,
    rule,
    problem,
    fix
from problems
