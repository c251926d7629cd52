-- Roofline ceilings of every model × deployment: the GPU's HBM roof (bandwidth × intensity) up to each compute peak its ops use, as line points spanning every workload's ops.
with
ops as (
    select
        o.model,
        o.deployment,
        o.workload,
        o.math_dtype,
        o.peak_flops_per_s,
        o.flops / o.bytes as arithmetic_intensity
    from op_sol as o
    where o.flops > 0 and o.bytes > 0 and o.time_s > 0
),

spans as (
    select
        model,
        deployment,
        min(arithmetic_intensity) as lowest,
        max(arithmetic_intensity) as highest
    from ops
    group by model, deployment
),

peaks as (
    select distinct
        model,
        deployment,
        math_dtype,
        peak_flops_per_s
    from ops
    where peak_flops_per_s > 0  -- element-wise ops have no math peak; they still span the axis
),

-- the bandwidth is the GPU's whatever the dtype (op_sol reads it from the bf16 row too)
bandwidths as (
    select
        d.deployment,
        d.gpu,
        g.hbm_bytes_per_s
    from base_deployments as d
    inner join int_gpu_specs as g on g.gpu = d.gpu and g.dtype = 'bf16'
),

roofs as (
    select
        p.model,
        p.deployment,
        b.gpu,
        p.math_dtype,
        p.peak_flops_per_s,
        b.hbm_bytes_per_s,
        p.peak_flops_per_s / b.hbm_bytes_per_s as ridge,
        least(s.lowest, p.peak_flops_per_s / b.hbm_bytes_per_s) / 2 as left_end,
        greatest(s.highest, p.peak_flops_per_s / b.hbm_bytes_per_s) * 2 as right_end
    from peaks as p
    inner join spans as s on s.model = p.model and s.deployment = p.deployment
    inner join bandwidths as b on b.deployment = p.deployment
),

-- three points per roof: the memory roof's left end, the ridge, the compute roof's right end
points as (
    select
        r.*,
        k.point,
        case k.point when 1 then r.left_end when 2 then r.ridge else r.right_end end as arithmetic_intensity
    from roofs as r
    cross join (values (1), (2), (3)) as k (point)
)

select
    model,
    deployment,
    gpu,
    math_dtype || ' roof' as roof,
    point,
    arithmetic_intensity,
    least(peak_flops_per_s, hbm_bytes_per_s * arithmetic_intensity) as flops_per_s,
    peak_flops_per_s,
    hbm_bytes_per_s,
    ridge
from points
order by model, deployment, roof, point
