-- Speed of light of every op on one device, for every model × deployment × workload.
with

-- one forward's work times the forwards a step runs (1; a multi-token-prediction op of a
-- drafting deployment k per decode step: int_deployment_nodes; a pipeline send, no node, 1)
values_ as (
    select
        v.* exclude (cache_bytes, output_bytes, flops, hbm_bytes, comm_bytes, scaleout_bytes),
        coalesce(r.runs, 1) as runs,
        v.flops * coalesce(r.runs, 1) as flops,
        v.hbm_bytes * coalesce(r.runs, 1) as bytes,
        v.comm_bytes * coalesce(r.runs, 1) as comm_bytes,
        v.scaleout_bytes * coalesce(r.runs, 1) as scaleout_bytes
    from int_device_op_values as v
    left join int_deployment_nodes as r
        on r.model = v.model and r.deployment = v.deployment and r.phase = v.phase and r.uid = v.uid
),

deployments as (
    select
        deployment,
        gpu,
        weight_dtype,
        act_dtype,
        weight_profile
    from base_deployments as d
    where not exists (select 1 from deployment_checks as x where x.deployment = d.deployment)
),

-- the unit each op's FLOPs run on (Primitive.math_class)
op_math as (
    select
        op,
        math_class
    from base_op_math
),

-- the nodes whose weight a profile stores quantized (FP8 blocks, NVFP4, ...): their matmuls
-- run in the deployment's matmul dtype, the activations quantized to match; the weights a
-- profile leaves unquantized (routers, lm_head, embeddings in the fp8 profile) run in the
-- act dtype.  A deployment without a matmul dtype (weight_dtype null: 'native', the format
-- differing per model) runs each in the dtype of its stored elements: the dtypes row as wide
-- as a stored element (storage bits / packing: 8 → fp8, 4 → fp4)
quantized as (
    select
        model,
        profile,
        uid,
        bool_or(scheme <> 'none') as quantized,
        min(bits / packing) filter (where scheme <> 'none') as element_bits
    from int_storage_bytes
    where part = 'data'
    group by model, profile, uid
),

element_dtypes as (
    select
        dtype,
        bytes * 8 as bits
    from base_dtypes
    where dtype in ('fp8', 'fp4')
),

-- the dtype each op's FLOPs run in; null: not tensor-core work, and the GPU table has no
-- vector (CUDA-core) rate, so the op is priced by its bytes (and links) only
typed as (
    select
        v.*,
        d.gpu,
        m.math_class,
        case m.math_class
            when 'weight_gemm' then case when coalesce(q.quantized, false) then coalesce(d.weight_dtype, e.dtype) else d.act_dtype end
            when 'activation_gemm' then d.act_dtype
        end as math_dtype
    from values_ as v
    inner join deployments as d on d.deployment = v.deployment
    left join op_math as m on m.op = v.op
    left join quantized as q on q.model = v.model and q.profile = d.weight_profile and q.uid = v.uid
    left join element_dtypes as e on e.bits = q.element_bits
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

-- the bandwidths are the GPU's whatever the dtype: read them from its bf16 row
bandwidths as (
    select
        gpu,
        hbm_bytes_per_s,
        link_bytes_per_s,
        scaleout_bytes_per_s
    from gpus
    where dtype = 'bf16'
),

priced as (
    select
        t.* exclude (gpu),
        p.peak_flops_per_s,
        case
            when t.comm_bytes = 0 then null
            when t.scaleout_bytes = 0 then 'scale-up'
            when t.scaleout_bytes >= t.comm_bytes * (1 - 1e-12) then 'scale-out'
            else 'both'
        end as link,
        t.flops / p.peak_flops_per_s as compute_s,
        t.bytes / g.hbm_bytes_per_s as memory_s,
        -- the scale-up and scale-out parts of a collective move at the same time
        greatest(
            (t.comm_bytes - t.scaleout_bytes) / g.link_bytes_per_s,
            case when t.scaleout_bytes > 0 then t.scaleout_bytes / g.scaleout_bytes_per_s else 0 end
        ) as comm_s
    from typed as t
    inner join bandwidths as g on g.gpu = t.gpu
    left join gpus as p on p.gpu = t.gpu and p.dtype = t.math_dtype
),

bounded as (
    select
        *,
        greatest(compute_s, memory_s, comm_s) as time_s,
        case
            when greatest(compute_s, memory_s, comm_s) = 0 then 'none'
            when comm_s >= coalesce(compute_s, 0) and comm_s >= memory_s then 'comm'
            when coalesce(compute_s, 0) >= memory_s then 'compute'
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
    runs,
    flops,
    bytes,
    comm_bytes,
    scaleout_bytes,
    link,
    math_class,
    math_dtype,
    peak_flops_per_s,
    compute_s,
    memory_s,
    comm_s,
    time_s,
    bound,
    arithmetic_intensity
from bounded
