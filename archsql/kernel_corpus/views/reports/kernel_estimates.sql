-- The estimated time of every kernel signature the speed-of-light side has (kernel_signatures:
-- op by op; launched_signatures: as frameworks launch them), per library measured on its GPU,
-- from that library's grid of measurements (int_kernel_grid_points: its newest version
-- holding the grid, the fastest row per signature), and how it was estimated (method):
--   'exact'            the grid holds the signature: its measured time;
--   'interpolated'     between the neighbouring grid points on each of the op kind's axes
--                      (kernel_interp_axes: GEMM m, n, k; attention batch, q_len, cache;
--                      MoE tokens; all-reduce message bytes): the points' efficiency (SOL /
--                      measured) multilinear in ln(coordinate), applied to this signature's
--                      SOL — at fixed n, k piecewise-linear in ln m, across n, k the
--                      neighbouring shapes' efficiency (roofline-normalised);
--   'extrapolated'     as interpolated, with an axis outside the grid clamped to its nearest
--                      grid value (that point's efficiency);
--   'sol × efficiency' no complete set of neighbours (another grid, a non-product grid, an op
--                      kind without axes): SOL / the median efficiency of the library's points
--                      of this GPU × op kind × dtype — a fallback, flagged;
--   'none'             not even that (the library has no point of the dtype).
-- SOL is the slowest of compute, device memory and link for the signature's work (the
-- kernel_* macros, as int_kernel_corpus_work computes it for the points), one launch.
with

op_kinds as (
    select
        op_kind,
        signature
    from base_kernel_op_kinds
),

-- every distinct kernel signature of the SOL side, in the corpus's columns (the op-by-op
-- rows lack the fused kernels' inter, kv_lora_rank and rope_dim: null there, by name)
signatures as (
    select distinct
        gpu,
        op_kind,
        phase,
        dtype,
        weight_dtype,
        kv_dtype,
        tp,
        ep,
        nodes,
        m,
        n,
        k,
        batch,
        q_len,
        kv_len,
        heads,
        kv_heads,
        head_dim,
        v_head_dim,
        window_size,
        tokens,
        hidden,
        inter,
        topk,
        experts,
        kv_lora_rank,
        rope_dim,
        routing,
        message_bytes,
        group_size
    from (
        select * from kernel_signatures
        union all by name
        select * from launched_signatures
    )
    where op_kind is not null
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
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

-- the work of one launch, as int_kernel_corpus_work computes a measurement's (a fused MoE
-- gated, as the corpus's MoE rows are)
work as (
    select
        s.gpu,
        s.op_kind,
        s.dtype,
        list_transform(o.signature, lambda f: json_extract_string(to_json(s), f)) as key,
        o.signature,
        kernel_interp_axes(s.op_kind, s.m, s.n, s.k, s.batch, s.q_len, s.kv_len, s.tokens, s.message_bytes) as interp,
        s.m,
        s.n,
        s.k,
        s.batch,
        s.q_len,
        s.kv_len,
        s.heads,
        s.kv_heads,
        s.head_dim,
        s.tokens,
        s.hidden,
        s.experts,
        s.message_bytes,
        s.group_size,
        kernel_flops(
            s.op_kind, s.phase, s.m, s.n, s.k, s.batch, s.q_len, s.kv_len, s.heads, s.kv_heads, s.head_dim,
            s.v_head_dim, s.window_size, s.kv_lora_rank, s.rope_dim, null, null, null, null, s.tokens, s.hidden,
            s.inter, s.topk, s.experts, s.tp, s.ep, s.op_kind = 'moe'
        ) as flops,
        kernel_hbm_bytes(
            s.op_kind, s.phase, s.m, s.n, s.k, s.batch, s.q_len, s.kv_len, s.heads, s.kv_heads, s.head_dim,
            s.v_head_dim, s.window_size, s.kv_lora_rank, s.rope_dim, null, null, null, null, null, s.tokens,
            s.hidden, s.inter, s.topk, s.experts, s.tp, s.ep, s.op_kind = 'moe', s.routing,
            a.bytes, coalesce(w.bytes, a.bytes), coalesce(kv.bytes, a.bytes)
        ) as hbm_bytes,
        kernel_link_bytes(
            s.op_kind, s.message_bytes, s.group_size, s.nodes, s.tokens, s.hidden, s.topk, s.ep, s.routing, a.bytes
        ) as link_bytes,
        greatest(pd.peak_flops_per_s, pk.peak_flops_per_s, pw.peak_flops_per_s) as peak_flops_per_s,
        b.hbm_bytes_per_s,
        b.link_bytes_per_s
    from signatures as s
    inner join op_kinds as o on o.op_kind = s.op_kind
    left join dtypes as a on a.dtype = s.dtype
    left join dtypes as w on w.dtype = s.weight_dtype
    left join dtypes as kv on kv.dtype = s.kv_dtype
    left join peaks as pd on pd.gpu = s.gpu and pd.dtype = s.dtype
    left join peaks as pk on pk.gpu = s.gpu and pk.dtype = s.kv_dtype
    left join peaks as pw on pw.gpu = s.gpu and pw.dtype = s.weight_dtype
    left join bandwidths as b on b.gpu = s.gpu
),

-- one row per signature (a GEMM's phase is not part of its key)
targets as (
    select
        gpu,
        op_kind,
        key,
        any_value(dtype) as dtype,
        any_value(
            list_transform(
                range(1, len(signature) + 1),
                lambda i: case when list_contains(interp.fields, signature[i]) then '*' else key[i] end
            )
        ) as group_key,
        any_value(interp.fields) as fields,
        any_value(interp.x) as x,
        any_value(m) as m,
        any_value(n) as n,
        any_value(k) as k,
        any_value(batch) as batch,
        any_value(q_len) as q_len,
        any_value(kv_len) as kv_len,
        any_value(heads) as heads,
        any_value(kv_heads) as kv_heads,
        any_value(head_dim) as head_dim,
        any_value(tokens) as tokens,
        any_value(hidden) as hidden,
        any_value(experts) as experts,
        any_value(message_bytes) as message_bytes,
        any_value(group_size) as group_size,
        max(greatest(flops / peak_flops_per_s, hbm_bytes / hbm_bytes_per_s, link_bytes / link_bytes_per_s)) as sol_s
    from work
    group by gpu, op_kind, key
),

points as (
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
        efficiency
    from int_kernel_grid_points
),

grids as (
    select distinct
        gpu,
        op_kind,
        library,
        library_version,
        group_key
    from points
),

libraries as (
    select distinct
        gpu,
        op_kind,
        library
    from grids
),

-- every signature × every library with points of its GPU and op kind, and the library's grid
-- of the signature (null: none)
estimable as (
    select
        t.*,
        l.library,
        g.library_version
    from targets as t
    inner join libraries as l on l.gpu = t.gpu and l.op_kind = t.op_kind
    left join grids as g
        on g.gpu = t.gpu and g.op_kind = t.op_kind and g.library = l.library and g.group_key = t.group_key
),

axis_values as (
    select distinct
        p.gpu,
        p.op_kind,
        p.library,
        p.group_key,
        a.i,
        p.x[a.i] as v
    from points as p
    cross join (select unnest([1, 2, 3]) as i) as a
),

-- per axis: the grid values either side of the signature's coordinate, and the grid's ends
bounds as (
    select
        e.gpu,
        e.op_kind,
        e.library,
        e.key,
        a.i,
        any_value(e.x[a.i]) as x,
        max(a.v) filter (where a.v <= e.x[a.i]) as lo,
        min(a.v) filter (where a.v >= e.x[a.i]) as hi,
        min(a.v) as first,
        max(a.v) as last
    from estimable as e
    inner join axis_values as a
        on a.gpu = e.gpu and a.op_kind = e.op_kind and a.library = e.library and a.group_key = e.group_key
    group by e.gpu, e.op_kind, e.library, e.key, a.i
),

-- per axis, the grid values used and their weights, linear in ln(x); outside the grid the
-- nearest end with weight 1 (clamped)
axis_weights as (
    select
        gpu,
        op_kind,
        library,
        key,
        i,
        lo is null or hi is null as clamped,
        lo < hi as between,
        case
            when lo is null then [{'v': first, 'w': 1.0}]
            when hi is null then [{'v': last, 'w': 1.0}]
            when lo = hi then [{'v': lo, 'w': 1.0}]
            else [{'v': lo, 'w': ln(hi / x) / ln(hi / lo)}, {'v': hi, 'w': ln(x / lo) / ln(hi / lo)}]
        end as nodes
    from bounds
),

-- the neighbouring grid points: every combination of the axes' values, its weight the product
corners as (
    select
        a1.gpu,
        a1.op_kind,
        a1.library,
        a1.key,
        [c1.node.v, c2.node.v, c3.node.v] as x,
        c1.node.w * c2.node.w * c3.node.w as w,
        len(a1.nodes) * len(a2.nodes) * len(a3.nodes) as expected
    from axis_weights as a1
    inner join axis_weights as a2
        on a2.gpu = a1.gpu and a2.op_kind = a1.op_kind and a2.library = a1.library and a2.key = a1.key and a2.i = 2
    inner join axis_weights as a3
        on a3.gpu = a1.gpu and a3.op_kind = a1.op_kind and a3.library = a1.library and a3.key = a1.key and a3.i = 3
    cross join unnest(a1.nodes) as c1(node)
    cross join unnest(a2.nodes) as c2(node)
    cross join unnest(a3.nodes) as c3(node)
    where a1.i = 1
),

interpolated as (
    select
        c.gpu,
        c.op_kind,
        c.library,
        c.key,
        sum(c.w * p.efficiency) as efficiency,
        count(p.efficiency) as corners,
        count(p.efficiency) = any_value(c.expected) as complete
    from corners as c
    inner join estimable as e on e.gpu = c.gpu and e.op_kind = c.op_kind and e.library = c.library and e.key = c.key
    left join points as p
        on
            p.gpu = c.gpu and p.op_kind = c.op_kind and p.library = c.library and p.group_key = e.group_key
            and p.x = c.x
    group by c.gpu, c.op_kind, c.library, c.key
),

-- the axes interpolated along (between) and clamped (outside the grid)
axes as (
    select
        w.gpu,
        w.op_kind,
        w.library,
        w.key,
        bool_or(w.clamped) as clamped,
        string_agg(e.fields[w.i], ', ' order by w.i) filter (where w.between or w.clamped) as axes
    from axis_weights as w
    inner join estimable as e on e.gpu = w.gpu and e.op_kind = w.op_kind and e.library = w.library and e.key = w.key
    group by w.gpu, w.op_kind, w.library, w.key
),

-- the fallback: the median efficiency of the library's points per GPU × op kind × dtype
typical as (
    select
        gpu,
        op_kind,
        library,
        dtype,
        median(efficiency) as efficiency
    from points
    group by gpu, op_kind, library, dtype
),

estimated as (
    select
        e.*,
        p.latency_us as measured_us,
        i.efficiency as interpolated_efficiency,
        i.complete,
        i.corners,
        x.axes,
        x.clamped,
        f.efficiency as typical_efficiency
    from estimable as e
    left join points as p
        on p.gpu = e.gpu and p.op_kind = e.op_kind and p.library = e.library and p.key = e.key
    left join interpolated as i on i.gpu = e.gpu and i.op_kind = e.op_kind and i.library = e.library and i.key = e.key
    left join axes as x on x.gpu = e.gpu and x.op_kind = e.op_kind and x.library = e.library and x.key = e.key
    left join typical as f on f.gpu = e.gpu and f.op_kind = e.op_kind and f.library = e.library and f.dtype = e.dtype
),

methods as (
    select
        *,
        case
            when measured_us is not null then 'exact'
            when complete and not clamped then 'interpolated'
            when complete then 'extrapolated'
            when typical_efficiency is not null then 'sol × efficiency'
            else 'none'
        end as method
    from estimated
)

select
    gpu,
    op_kind,
    library,
    case when method in ('exact', 'interpolated', 'extrapolated') then library_version end as library_version,
    key,
    dtype,
    m,
    n,
    k,
    batch,
    q_len,
    kv_len,
    heads,
    kv_heads,
    head_dim,
    tokens,
    hidden,
    experts,
    message_bytes,
    group_size,
    sol_s * 1e6 as sol_us,
    method,
    case when method in ('interpolated', 'extrapolated') then axes end as axes,
    case when method in ('interpolated', 'extrapolated') then corners end as corners,
    case
        when method = 'exact' then sol_s * 1e6 / measured_us
        when method in ('interpolated', 'extrapolated') then interpolated_efficiency
        when method = 'sol × efficiency' then typical_efficiency
    end as efficiency,
    case
        when method = 'exact' then measured_us
        when method in ('interpolated', 'extrapolated') then sol_s * 1e6 / interpolated_efficiency
        when method = 'sol × efficiency' then sol_s * 1e6 / typical_efficiency
    end as latency_us,
    method = 'sol × efficiency' as fallback
from methods
