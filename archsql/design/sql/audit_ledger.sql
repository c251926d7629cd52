-- The audit card's ledgers: params by role, weights, KV/state per token and at a context,
-- for the baseline and the candidate, read from the report views.
-- Parameters: $baseline, $candidate (models), $decode (a decode workload), $dtype (cache dtype).
with

values_ as (
    select 'params_by_role' as section, role as item, 'parameters' as unit, model, params::double as value
    from params_by_role
    where model in ($baseline, $candidate)
    union all
    select 'totals', 'params', 'parameters', model, params::double
    from model_summary
    where model in ($baseline, $candidate)
    union all
    select 'totals', 'active_params', 'parameters', model, active_params::double
    from model_summary
    where model in ($baseline, $candidate)
    union all
    select 'totals', 'weight_bytes', 'bytes', model, sum(total_bytes)::double
    from weight_storage
    where model in ($baseline, $candidate) and profile = 'native' and not is_buffer
    group by model
    union all
    select 'kv', 'kv_bytes_per_token', 'bytes/token', model, bytes_per_token
    from kv_per_token
    where model in ($baseline, $candidate) and dtype = $dtype
    union all
    select 'kv', 'state_bytes_per_request', 'bytes', model, state_bytes_per_request
    from kv_per_token
    where model in ($baseline, $candidate) and dtype = $dtype
    union all
    select 'kv', 'kv_bytes_per_request', 'bytes', model, bytes_per_request
    from kv_per_request
    where model in ($baseline, $candidate) and workload = $decode and dtype = $dtype
),

paired as (
    select
        section,
        item,
        any_value(unit) as unit,
        max(value) filter (where model = $baseline) as baseline,
        max(value) filter (where model = $candidate) as candidate
    from values_
    group by section, item
),

ordered as (
    select
        section,
        item,
        unit,
        baseline,
        candidate,
        coalesce(candidate, 0) - coalesce(baseline, 0) as delta,
        candidate / nullif(baseline, 0) as ratio,
        case section when 'totals' then 1 when 'params_by_role' then 2 else 3 end as section_order
    from paired
)

select
    section,
    item,
    unit,
    baseline,
    candidate,
    delta,
    ratio
from ordered
order by section_order, section, item
