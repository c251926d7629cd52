-- Leave-one-out error of kernel_estimates on the corpus itself: every grid point
-- (int_kernel_grid_points) estimated as if it were not measured, once per axis of its op kind
-- along which it has a neighbour — 'interpolated' between its two neighbours on that axis
-- (the other coordinates equal; efficiency linear in ln x, as kernel_estimates), or
-- 'extrapolated' from its one neighbour at a grid end (that point's efficiency) — and once by
-- the fallback ('sol × efficiency': the median efficiency of the library's points of its GPU ×
-- op kind × dtype, the point itself included).  error = estimate / measured − 1.
with

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

-- each point once per axis, with its neighbours' coordinate and efficiency on that axis
along as (
    select
        p.*,
        a.i,
        kernel_interp_axes(p.op_kind, null, null, null, null, null, null, null, null).fields[a.i] as axis,
        lag(p.x[a.i]) over line as x_before,
        lag(p.efficiency) over line as efficiency_before,
        lead(p.x[a.i]) over line as x_after,
        lead(p.efficiency) over line as efficiency_after
    from points as p
    cross join (select unnest([1, 2, 3]) as i) as a
    window line as (
        partition by p.gpu, p.op_kind, p.library, p.group_key, a.i, list_concat(p.x[1:a.i - 1], p.x[a.i + 1:3])
        order by p.x[a.i]
    )
),

left_out as (
    select
        gpu,
        op_kind,
        library,
        library_version,
        dtype,
        key,
        axis,
        case when x_before is not null and x_after is not null then 'interpolated' else 'extrapolated' end as method,
        latency_us,
        efficiency,
        case
            when x_before is not null and x_after is not null
                then efficiency_before
                + (efficiency_after - efficiency_before) * ln(x[i] / x_before) / ln(x_after / x_before)
            else coalesce(efficiency_before, efficiency_after)
        end as estimated_efficiency
    from along
    where x_before is not null or x_after is not null
),

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

fallback as (
    select
        p.gpu,
        p.op_kind,
        p.library,
        p.library_version,
        p.dtype,
        p.key,
        null::varchar as axis,
        'sol × efficiency' as method,
        p.latency_us,
        p.efficiency,
        t.efficiency as estimated_efficiency
    from points as p
    inner join typical as t on t.gpu = p.gpu and t.op_kind = p.op_kind and t.library = p.library and t.dtype = p.dtype
),

estimates as (
    select *
    from left_out
    union all
    select *
    from fallback
)

select
    gpu,
    op_kind,
    library,
    library_version,
    dtype,
    key,
    axis,
    method,
    latency_us as measured_us,
    latency_us * efficiency / estimated_efficiency as estimated_us,
    efficiency / estimated_efficiency - 1 as error
from estimates
