-- Speed of light of every op on one device, for every model × deployment × workload.
with

deployments as (
    select
        deployment,
        gpu,
        weight_dtype,
        act_dtype,
        kv_dtype
    from base_deployments
),

gpus as (
    select
        gpu,
        dtype,
        peak_flops_per_s,
        hbm_bytes_per_s,
        link_bytes_per_s
    from int_gpu_specs
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

op_values as (
    select
        model,
        deployment,
        workload,
        phase,
        uid,
        op,
        role,
        quantity,
        value
    from int_workload_terms
    where deployment is not null
),

op_weights as (
    select
        model,
        deployment,
        uid,
        sum(elements) as elements
    from int_device_weights
    where in_base_model and streamed
    group by model, deployment, uid
),

per_op as (
    select
        e.model,
        e.deployment,
        e.workload,
        e.phase,
        e.uid,
        any_value(e.op) as op,
        any_value(e.role) as role,
        coalesce(sum(e.value) filter (where e.quantity = 'flops'), 0) as flops,
        coalesce(sum(e.value) filter (where e.quantity in ('read_elements', 'write_elements')), 0) as act_elements,
        coalesce(sum(e.value) filter (where e.quantity = 'cache_read_elements'), 0) as cache_elements,
        coalesce(sum(e.value) filter (where e.quantity = 'comm_elements'), 0) as comm_elements
    from op_values as e
    group by e.model, e.deployment, e.workload, e.phase, e.uid
),

priced as (
    select
        p.model,
        p.deployment,
        p.workload,
        p.phase,
        p.uid,
        p.op,
        p.role,
        p.flops,
        p.act_elements * act.bytes + p.cache_elements * kv.bytes + coalesce(ow.elements, 0) * wt.bytes as bytes,
        p.comm_elements * act.bytes as comm_bytes,
        p.flops / g.peak_flops_per_s as compute_s,
        (p.act_elements * act.bytes + p.cache_elements * kv.bytes + coalesce(ow.elements, 0) * wt.bytes)
            / g.hbm_bytes_per_s as memory_s,
        p.comm_elements * act.bytes / g.link_bytes_per_s as comm_s
    from per_op as p
    inner join deployments as d on d.deployment = p.deployment
    inner join gpus as g on g.gpu = d.gpu and g.dtype = d.weight_dtype
    inner join dtypes as act on act.dtype = d.act_dtype
    inner join dtypes as kv on kv.dtype = d.kv_dtype
    inner join dtypes as wt on wt.dtype = d.weight_dtype
    left join op_weights as ow on ow.model = p.model and ow.deployment = p.deployment and ow.uid = p.uid
),

bounded as (
    select
        model,
        deployment,
        workload,
        phase,
        uid,
        op,
        role,
        flops,
        bytes,
        comm_bytes,
        compute_s,
        memory_s,
        comm_s,
        greatest(compute_s, memory_s, comm_s) as time_s,
        case
            when greatest(compute_s, memory_s, comm_s) = 0 then 'none'
            when comm_s >= compute_s and comm_s >= memory_s then 'comm'
            when compute_s >= memory_s then 'compute'
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
    flops,
    bytes,
    comm_bytes,
    compute_s,
    memory_s,
    comm_s,
    time_s,
    bound,
    arithmetic_intensity
from bounded
