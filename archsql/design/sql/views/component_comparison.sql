-- Components compared under one contract: one row per probe (design_probes) and context.
-- Every number is read from the report views over the probes' evaluated rows (group 'probe').
with

probes as (
    select
        position,
        model,
        slot,
        component,
        origin,
        origin_template,
        role,
        d_model,
        dtype,
        deployment
    from design_probes
),

workloads as (
    select
        workload,
        phase,
        batch,
        new_tokens,
        context
    from base_workloads
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

deployments as (
    select
        deployment,
        gpu
    from base_deployments
),

groups as (
    select
        model,
        params_per_layer
    from params_by_layer_group
    where template = 'probe'
),

group_flops as (
    select
        model,
        workload,
        flops
    from flops_by_layer_group
    where template = 'probe'
),

group_sol as (
    select
        model,
        deployment,
        workload,
        time_s,
        compute_s,
        memory_s
    from sol_by_layer_group
    where template = 'probe'
),

group_caches as (
    select
        model,
        workload,
        dtype,
        sum(bytes) as bytes
    from kv_by_layer_group
    where template = 'probe'
    group by model, workload, dtype
),

group_growth as (
    select
        model,
        dtype,
        sum(bytes_per_token) as bytes_per_token,
        sum(state_bytes_per_request) as state_bytes_per_request
    from kv_per_token_by_kind
    where template = 'probe'
    group by model, dtype
),

cache_laws as (
    select
        c.model,
        string_agg(
            distinct case
                when c.growth in ('window', 'chunk') and c."window" > 0 then c.growth || ':' || c."window"
                when c.growth = 'compressed' then c.growth || ':' || c.ratio
                when c.growth in ('window', 'chunk') then 'per_token'
                else c.growth
            end,
            '+'
        ) as cache_growth
    from base_caches as c
    inner join base_nodes as n on n.model = c.model and n.uid = c.uid
    where n.template = 'probe'
    group by c.model
),

contexts as (
    select
        p.workload as prefill_workload,
        d.workload as decode_workload,
        p.batch,
        p.context
    from workloads as p
    inner join workloads as d on d.context = p.context and d.batch = p.batch and d.phase = 'decode'
    where p.phase = 'prefill' and p.new_tokens = p.context
),

joined as (
    select
        pr.position,
        pr.slot,
        pr.component,
        pr.origin,
        pr.origin_template,
        pr.role,
        pr.model,
        pr.d_model,
        c.batch,
        pr.dtype,
        dep.gpu,
        c.context,
        g.params_per_layer,
        g.params_per_layer * dt.bytes as weight_bytes_per_layer,
        coalesce(law.cache_growth, 'none') as cache_growth,
        coalesce(gr.bytes_per_token, 0) as cache_bytes_per_token,
        coalesce(gr.state_bytes_per_request, 0) as state_bytes_per_request,
        coalesce(f.flops, 0) as prefill_flops,
        sp.time_s as prefill_time_s,
        case
            when sp.time_s is null or sp.time_s = 0 then null
            when sp.compute_s >= sp.memory_s then 'compute'
            else 'memory'
        end as prefill_bound,
        sd.time_s as decode_time_s,
        coalesce(kv.bytes, 0) / c.batch as cache_bytes_per_request
    from probes as pr
    cross join contexts as c
    inner join dtypes as dt on dt.dtype = pr.dtype
    left join deployments as dep on dep.deployment = pr.deployment
    left join groups as g on g.model = pr.model
    left join cache_laws as law on law.model = pr.model
    left join group_growth as gr on gr.model = pr.model and gr.dtype = pr.dtype
    left join group_flops as f on f.model = pr.model and f.workload = c.prefill_workload
    left join group_sol as sp
        on sp.model = pr.model and sp.deployment = pr.deployment and sp.workload = c.prefill_workload
    left join group_sol as sd
        on sd.model = pr.model and sd.deployment = pr.deployment and sd.workload = c.decode_workload
    left join group_caches as kv
        on kv.model = pr.model and kv.workload = c.decode_workload and kv.dtype = pr.dtype
)

select
    position,
    slot,
    component,
    origin,
    origin_template,
    role,
    model,
    d_model,
    batch,
    dtype,
    gpu,
    context,
    params_per_layer,
    weight_bytes_per_layer,
    cache_growth,
    cache_bytes_per_token,
    state_bytes_per_request,
    prefill_flops,
    prefill_time_s,
    prefill_bound,
    decode_time_s,
    cache_bytes_per_request
from joined
