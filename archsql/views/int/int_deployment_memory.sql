-- The memory one device of each deployment may fill (weights + caches + activations): the
-- device's exposed capacity × the usable fraction, the deployment's own or its framework's default.
with

deployments as (
    select
        deployment,
        gpu,
        gpus,
        usable_memory_fraction
    from base_deployments
),

degrees as (
    select
        deployment,
        dp,
        pp
    from int_deployment_degrees
),

gpus as (
    select
        gpu,
        memory_bytes,
        marketed_memory_bytes,
        memory_basis
    from int_gpu_specs
    where dtype = 'bf16'
),

deployment_frameworks as (
    select
        deployment,
        framework
    from base_deployment_frameworks
),

frameworks as (
    select
        framework,
        memory_knob,
        default_fraction
    from base_frameworks
),

joined as (
    select
        d.deployment,
        d.gpu,
        df.framework,
        f.memory_knob,
        d.usable_memory_fraction,
        f.default_fraction,
        g.memory_bytes,
        g.marketed_memory_bytes,
        g.memory_basis,
        g.memory_bytes / 1048576.0 as gpu_mem_mib,
        -- SGLang's tp_size is every GPU of a pipeline stage (attention DP runs inside it)
        d.gpus // dg.pp as sglang_tp,
        dg.pp,
        dg.dp
    from deployments as d
    inner join degrees as dg on dg.deployment = d.deployment
    inner join gpus as g on g.gpu = d.gpu
    left join deployment_frameworks as df on df.deployment = d.deployment
    left join frameworks as f on f.framework = df.framework
),

-- SGLang mem_fraction_static when not given (sgl-project/sglang python/sglang/srt/server_args.py,
-- ServerArgs._handle_gpu_memory_settings; gpu_mem in MiB): chunked_prefill_size and
-- cuda_graph_max_bs by GPU memory tier, then reserved_mem = 512 + max(chunked, 2048) × 1.5
-- + cuda_graph_max_bs × 2 + tp × pp / 8 × 1024 (+ cuda_graph_max_bs × dp × 3, and × 1.5 more
-- above 300, under DP attention), at least 10 GiB above 60 GiB of memory; fraction =
-- round((gpu_mem − reserved_mem) / gpu_mem, 3).  No speculative decoding, no piecewise CUDA graphs.
sglang_tiers as (
    select
        *,
        case
            when gpu_mem_mib < 20 * 1024 then 2048
            when gpu_mem_mib < 35 * 1024 then 2048
            when gpu_mem_mib < 60 * 1024 then 4096
            when gpu_mem_mib < 160 * 1024 then 8192
            else 16384
        end as chunked_prefill_size,
        case
            when gpu_mem_mib < 20 * 1024 then 8
            when gpu_mem_mib < 35 * 1024 then (case when sglang_tp < 4 then 24 else 80 end)
            when gpu_mem_mib < 60 * 1024 then (case when sglang_tp < 4 then 32 else 160 end)
            when gpu_mem_mib < 160 * 1024 then (case when sglang_tp < 4 then 256 else 512 end)
            else 512
        end as cuda_graph_max_bs
    from joined
),

sglang_reserve as (
    select
        *,
        512 + greatest(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2 + sglang_tp * pp / 8 * 1024
        + case when dp > 1 then cuda_graph_max_bs * dp * 3 else 0 end
        + case when dp > 1 and cuda_graph_max_bs > 300 then cuda_graph_max_bs * dp * 1.5 else 0 end
            as reserved_raw_mib
    from sglang_tiers
),

fractions as (
    select
        *,
        case
            when usable_memory_fraction is not null then usable_memory_fraction
            when framework = 'sglang' and default_fraction is null
                then round(
                    (gpu_mem_mib - case
                        when gpu_mem_mib > 60 * 1024 then greatest(reserved_raw_mib, 10 * 1024)
                        else reserved_raw_mib
                    end) / gpu_mem_mib,
                    3
                )
            else default_fraction
        end as memory_fraction,
        case
            when usable_memory_fraction is not null then 'deployment'
            when framework is not null then 'framework default'
        end as fraction_from
    from sglang_reserve
)

select
    deployment,
    gpu,
    framework,
    memory_knob,
    memory_fraction,
    fraction_from,
    memory_bytes,
    marketed_memory_bytes,
    memory_basis,
    memory_bytes * memory_fraction as usable_bytes
from fractions
