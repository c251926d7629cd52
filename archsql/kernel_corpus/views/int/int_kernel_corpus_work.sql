-- Work and implied utilization of every measurement: the FLOPs, device-memory bytes and
-- link bytes its signature implies (kernel_* macros), against the GPU's peaks.  The compute
-- peak is the fastest of the row's dtype, kv_dtype and weight_dtype: an attention kernel may
-- run its math in the cache's dtype (FP8 attention over an FP8 cache), a module's
-- projections in their weights' format (an NVFP4 GEMM inside a BF16 attention module), so
-- the implied MFU is a lower bound and a value above 1 is certainly wrong.  Weight-only
-- quantization (a `quant` whose kernel_dtype_names row names a separate weight dtype:
-- int8_wo, w4a16_mxfp4, ...) computes in dtype: its weight dtype gives no faster peak.
with

corpus as (
    select *
    from base_kernel_corpus
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

weight_only as (
    select distinct quant
    from base_kernel_dtype_names
    where weight_dtype is not null
),

peaks as (
    select
        gpu,
        dtype,
        peak_flops_per_s
    from int_gpu_specs
),

bandwidths as (
    select
        gpu,
        max(hbm_bytes_per_s) as hbm_bytes_per_s,
        max(link_bytes_per_s) as link_bytes_per_s
    from int_gpu_specs
    group by gpu
),

work as (
    select
        c.source_hash,
        c.source_row,
        c.op_kind,
        c.gpu,
        c.dtype,
        c.kv_dtype,
        case when wo.quant is null then c.weight_dtype end as compute_weight_dtype,
        c.latency_us,
        kernel_flops(
            c.op_kind, c.phase, c.m, c.n, c.k, c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.head_dim,
            c.v_head_dim, c.window_size, c.kv_lora_rank, c.rope_dim, c.index_topk, c.compress_ratio,
            c.state_dim, c.conv_kernel, c.tokens, c.hidden, c.inter, c.topk, c.experts, c.tp, c.ep, c.gated
        ) as flops,
        kernel_hbm_bytes(
            c.op_kind, c.phase, c.m, c.n, c.k, c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads,
            c.head_dim, c.v_head_dim, c.window_size, c.kv_lora_rank, c.rope_dim, c.index_topk,
            c.compress_ratio, c.state_dim, c.conv_kernel, c.ssm_groups, c.tokens, c.hidden,
            c.inter, c.topk, c.experts, c.tp, c.ep, c.gated, c.routing,
            a.bytes,
            case when c.weight_dtype is null then a.bytes else w.bytes end,
            case when c.kv_dtype is null then a.bytes else kv.bytes end
        ) as hbm_bytes,
        kernel_link_bytes(
            c.op_kind, c.message_bytes, c.group_size, c.nodes, c.tokens, c.hidden, c.topk, c.ep, c.routing, a.bytes
        ) as link_bytes
    from corpus as c
    left join dtypes as a on a.dtype = c.dtype
    left join dtypes as w on w.dtype = c.weight_dtype
    left join dtypes as kv on kv.dtype = c.kv_dtype
    left join weight_only as wo on wo.quant = c.quant
),

implied as (
    select
        w.source_hash,
        w.source_row,
        w.op_kind,
        w.gpu,
        w.dtype,
        w.latency_us,
        w.flops,
        w.hbm_bytes,
        w.link_bytes,
        greatest(pd.peak_flops_per_s, pk.peak_flops_per_s, pw.peak_flops_per_s) as peak_flops_per_s,
        b.hbm_bytes_per_s,
        b.link_bytes_per_s
    from work as w
    left join peaks as pd on pd.gpu = w.gpu and pd.dtype = w.dtype
    left join peaks as pk on pk.gpu = w.gpu and pk.dtype = w.kv_dtype
    left join peaks as pw on pw.gpu = w.gpu and pw.dtype = w.compute_weight_dtype
    left join bandwidths as b on b.gpu = w.gpu
),

utilization as (
    select
        source_hash,
        source_row,
        op_kind,
        gpu,
        dtype,
        latency_us,
        flops,
        hbm_bytes,
        link_bytes,
        peak_flops_per_s,
        hbm_bytes_per_s,
        link_bytes_per_s,
        flops / (latency_us * 1e-6) / peak_flops_per_s as mfu,
        hbm_bytes / (latency_us * 1e-6) / hbm_bytes_per_s as mbu,
        link_bytes / (latency_us * 1e-6) / link_bytes_per_s as link_util
    from implied
)

select
    source_hash,
    source_row,
    op_kind,
    gpu,
    dtype,
    latency_us,
    flops,
    hbm_bytes,
    link_bytes,
    peak_flops_per_s,
    hbm_bytes_per_s,
    link_bytes_per_s,
    mfu,
    mbu,
    link_util
from utilization
