-- The corpus as grids to interpolate on (kernel_estimates, kernel_estimate_loo): per GPU × op
-- kind × library and grid (group_key: the signature with the interpolation axes masked, '*'),
-- the library's newest version holding that grid, one point per signature — its fastest
-- correct row — with its coordinates on the op kind's axes (kernel_interp_axes), its
-- speed-of-light time (the work of int_kernel_corpus_work against the GPU's peaks: the
-- slowest of compute, device memory and link) and its efficiency = SOL / measured.
with

op_kinds as (
    select
        op_kind,
        signature
    from base_kernel_op_kinds
),

measured_keys as (
    select
        source_hash,
        source_row,
        op_kind,
        gpu,
        library,
        library_version,
        latency_us,
        key
    from int_kernel_measured_keys
    -- only op kinds with axes (the filter reaches the corpus scan: no join key is built for the rest)
    where library is not null and kernel_interp_axes(op_kind, 1, 1, 1, 1, 1, 1, 1, 1) is not null
),

shapes as (
    select
        source_hash,
        source_row,
        op_kind,
        dtype,
        kernel_interp_axes(op_kind, m, n, k, batch, q_len, kv_len, tokens, message_bytes) as interp
    from base_kernel_corpus
),

work as (
    select
        source_hash,
        source_row,
        op_kind,
        greatest(
            flops / peak_flops_per_s, hbm_bytes / hbm_bytes_per_s, link_bytes / link_bytes_per_s
        ) as sol_s
    from int_kernel_corpus_work
),

measurements as (
    select
        k.gpu,
        k.op_kind,
        k.library,
        k.library_version,
        s.dtype,
        k.key,
        list_transform(
            range(1, len(o.signature) + 1),
            lambda i: case when list_contains(s.interp.fields, o.signature[i]) then '*' else k.key[i] end
        ) as group_key,
        s.interp.x as x,
        k.latency_us,
        w.sol_s
    from measured_keys as k
    inner join op_kinds as o on o.op_kind = k.op_kind
    inner join shapes as s on s.source_hash = k.source_hash and s.source_row = k.source_row and s.op_kind = k.op_kind
    inner join work as w on w.source_hash = k.source_hash and w.source_row = k.source_row and w.op_kind = k.op_kind
    where s.interp is not null and w.sol_s > 0
),

-- per grid, the library's newest version holding it
newest as (
    select
        gpu,
        op_kind,
        library,
        group_key,
        arg_max(library_version, version_order(library_version)) as library_version
    from measurements
    group by gpu, op_kind, library, group_key
),

points as (
    select
        m.gpu,
        m.op_kind,
        m.library,
        m.library_version,
        any_value(m.dtype) as dtype,
        m.group_key,
        m.key,
        any_value(m.x) as x,
        min(m.latency_us) as latency_us,
        arg_min(m.sol_s, m.latency_us) as sol_s
    from measurements as m
    inner join newest as v
        on
            v.gpu = m.gpu and v.op_kind = m.op_kind and v.library = m.library
            and v.group_key = m.group_key and v.library_version = m.library_version
    group by m.gpu, m.op_kind, m.library, m.library_version, m.group_key, m.key
)

select
    gpu,
    op_kind,
    library,
    library_version,
    dtype,
    group_key,
    key,
    x,
    latency_us,
    sol_s,
    sol_s / (latency_us * 1e-6) as efficiency
from points
