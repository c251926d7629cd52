-- Per-device terms of every op, one row per monomial with the op's quantities side by side
-- and memory traffic already in bytes of the deployment's dtypes (caches held in the dtype
-- of their storage rule, base_caches.dtype; weights read once per
-- step as a constant term, in bytes as stored in the deployment's weight profile, scales
-- included; a routed expert's weights apart, as expert_weight_bytes: a step reads only the
-- experts its tokens touch, which int_device_op_values weighs by the experts_touched macro):
-- what the speed-of-light views evaluate per workload.
with

terms as (
    select *
    from int_device_terms
),

deployments as (
    select
        deployment,
        weight_dtype,
        act_dtype,
        kv_dtype
    from base_deployments
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

-- the storage rule of each caching node (base_caches.dtype: one per node)
cache_rules as (
    select distinct
        model,
        uid,
        dtype as storage_rule,
        scale_dtype,
        scale_block
    from base_caches
),

streamed_weights as (
    select
        model,
        deployment,
        uid,
        sum(bytes) as bytes
    from int_device_weights
    where streamed
    group by model, deployment, uid
),

op_phases as (
    select distinct
        model,
        deployment,
        phase,
        uid,
        op,
        role
    from terms
),

-- routed experts: nodes whose copies (one per expert) are spread over a group
routed as (
    select distinct
        model,
        phase,
        uid
    from base_layouts
    where tensor = 'copies'
),

weight_terms as (
    select
        o.model,
        o.deployment,
        o.phase,
        o.uid,
        o.op,
        o.role,
        case when r.uid is null then 'weight_bytes' else 'expert_weight_bytes' end as quantity,
        0::tinyint as e_B,
        0::tinyint as e_s,
        0::tinyint as e_c,
        'none' as factor,
        0::bigint as factor_arg,
        w.bytes as coef
    from op_phases as o
    inner join streamed_weights as w on w.model = o.model and w.deployment = o.deployment and w.uid = o.uid
    left join routed as r on r.model = o.model and r.phase = o.phase and r.uid = o.uid
),

all_terms as (
    select * from terms
    union all by name
    select * from weight_terms
),

pivoted as (
    select
        t.model,
        t.deployment,
        t.phase,
        t.uid,
        any_value(t.op) as op,
        any_value(t.role) as role,
        t.e_B,
        t.e_s,
        t.e_c,
        t.factor,
        t.factor_arg,
        coalesce(sum(t.coef) filter (where t.quantity = 'flops'), 0) as flops,
        coalesce(sum(
            t.coef * case t.quantity
                when 'read_elements' then act.bytes
                when 'write_elements' then act.bytes
                when 'cache_read_elements'
                    then cache_element_bytes(rr.storage_rule, kv.bytes, act.bytes, rfixed.bytes, rscale.bytes, rr.scale_block)
                when 'weight_bytes' then 1
                else 0
            end
        ), 0) as hbm_bytes,
        coalesce(sum(t.coef) filter (where t.quantity = 'expert_weight_bytes'), 0) as expert_weight_bytes,
        coalesce(sum(t.coef * act.bytes) filter (where t.quantity = 'comm_elements'), 0) as comm_bytes,
        coalesce(sum(t.coef * act.bytes) filter (where t.quantity = 'scaleout_comm_elements'), 0) as scaleout_bytes,
        coalesce(sum(
            t.coef * cache_element_bytes(cr.storage_rule, kv.bytes, act.bytes, fixed.bytes, scale.bytes, cr.scale_block)
        ) filter (where t.quantity = 'cache_elements'), 0) as cache_bytes,
        coalesce(sum(t.coef * act.bytes) filter (where t.quantity = 'write_elements'), 0) as output_bytes
    from all_terms as t
    inner join deployments as d on d.deployment = t.deployment
    inner join dtypes as act on act.dtype = d.act_dtype
    inner join dtypes as kv on kv.dtype = d.kv_dtype
    left join cache_rules as cr on cr.model = t.model and cr.uid = t.uid and t.quantity = 'cache_elements'
    left join dtypes as fixed on fixed.dtype = cr.storage_rule
    left join dtypes as scale on scale.dtype = cr.scale_dtype
    left join int_cache_read_rules as rr
        on rr.model = t.model and rr.phase = t.phase and rr.uid = t.uid and t.quantity = 'cache_read_elements'
    left join dtypes as rfixed on rfixed.dtype = rr.storage_rule
    left join dtypes as rscale on rscale.dtype = rr.scale_dtype
    group by all
)

select *
from pivoted
