-- Old → new ledger of a model edit: every layer group (block template; null = outside the
-- stacks) and the whole model, each quantity read from its report view.
-- Parameters: $old, $new (models), $prefill, $decode (workloads), $dtype, $deployment.
-- One precision throughout: weight bytes in the deployment's weight profile (the one its
-- device memory holds), KV bytes in $dtype (the deployment's kv_dtype, archsql/design/edit.py);
-- the device rows say how much is short when the step does not fit.
with

profile as (
    select coalesce(weight_profile, 'native') as weight_profile
    from base_deployments
    where deployment = $deployment
),

stored as (
    select w.model, n.template, w.total_bytes
    from weight_storage as w
    inner join profile as p on w.profile = p.weight_profile
    inner join base_nodes as n on n.model = w.model and n.uid = w.uid
    where w.model in ($old, $new) and not w.is_buffer
),

models as (
    select model
    from base_models
    where model in ($old, $new)
),

decode_batch as (
    select batch
    from base_workloads
    where workload = $decode
),

group_layers as (
    select
        model,
        template,
        layers
    from params_by_layer_group
    where model in ($old, $new)
),

group_values as (
    select model, template, 'params' as quantity, params::double as value
    from params_by_layer_group
    where model in ($old, $new)
    union all
    select model, template, 'weight_bytes', sum(total_bytes)::double
    from stored
    group by model, template
    union all
    select model, template, 'prefill_flops', flops
    from flops_by_layer_group
    where model in ($old, $new) and workload = $prefill
    union all
    select model, template, 'kv_bytes_per_token', sum(bytes_per_token)
    from kv_per_token_by_kind
    where model in ($old, $new) and dtype = $dtype
    group by model, template
    union all
    select k.model, k.template, 'kv_bytes_per_request', sum(k.bytes) / any_value(b.batch)
    from kv_by_layer_group as k
    cross join decode_batch as b
    where k.model in ($old, $new) and k.workload = $decode and k.dtype = $dtype
    group by k.model, k.template
    union all
    select model, template, 'prefill_time_s', time_s
    from sol_by_layer_group
    where model in ($old, $new) and deployment = $deployment and workload = $prefill
    union all
    select model, template, 'decode_time_s', time_s
    from sol_by_layer_group
    where model in ($old, $new) and deployment = $deployment and workload = $decode
),

model_values as (
    select model, 'params' as quantity, params::double as value
    from model_summary
    where model in ($old, $new)
    union all
    select model, 'active_params', active_params::double
    from model_summary
    where model in ($old, $new)
    union all
    select model, 'weight_bytes', sum(total_bytes)::double
    from stored
    group by model
    union all
    select model, 'prefill_flops', flops
    from flops
    where model in ($old, $new) and workload = $prefill
    union all
    select model, 'kv_bytes_per_token', bytes_per_token
    from kv_per_token
    where model in ($old, $new) and dtype = $dtype
    union all
    select model, 'state_bytes_per_request', state_bytes_per_request
    from kv_per_token
    where model in ($old, $new) and dtype = $dtype
    union all
    select model, 'kv_bytes_per_request', bytes_per_request
    from kv_per_request
    where model in ($old, $new) and workload = $decode and dtype = $dtype
    union all
    select model, 'prefill_time_s', time_s
    from step_sol
    where model in ($old, $new) and deployment = $deployment and workload = $prefill
    union all
    select model, 'decode_time_s', time_s
    from step_sol
    where model in ($old, $new) and deployment = $deployment and workload = $decode
    union all
    select model, 'device_memory_bytes', total_bytes
    from device_memory
    where model in ($old, $new) and deployment = $deployment and workload = $decode
    union all
    select model, 'device_usable_bytes', usable_bytes
    from device_memory
    where model in ($old, $new) and deployment = $deployment and workload = $decode
    union all
    select model, 'device_shortfall_bytes', shortfall_bytes
    from device_memory
    where model in ($old, $new) and deployment = $deployment and workload = $decode
),

all_values as (
    select 'group' as scope, template, quantity, model, value
    from group_values
    union all
    select 'model' as scope, null as template, quantity, model, value
    from model_values
),

paired as (
    select
        scope,
        template,
        quantity,
        max(value) filter (where model = $old) as old,
        max(value) filter (where model = $new) as new
    from all_values
    group by scope, template, quantity
),

units as (
    select * from (
        values
            ('params', 'parameters', 1),
            ('active_params', 'parameters', 2),
            ('weight_bytes', 'bytes', 3),
            ('prefill_flops', 'FLOP', 4),
            ('kv_bytes_per_token', 'bytes/token', 5),
            ('state_bytes_per_request', 'bytes', 6),
            ('kv_bytes_per_request', 'bytes', 7),
            ('prefill_time_s', 's', 8),
            ('decode_time_s', 's', 9),
            ('device_memory_bytes', 'bytes', 10),
            ('device_usable_bytes', 'bytes', 11),
            ('device_shortfall_bytes', 'bytes', 12)
    ) as u (quantity, unit, quantity_order)
),

joined as (
    select
        p.scope,
        p.template,
        lo.layers as layers_old,
        ln.layers as layers_new,
        p.quantity,
        u.unit,
        p.old,
        p.new,
        coalesce(p.new, 0) - coalesce(p.old, 0) as delta,
        p.new / nullif(p.old, 0) as ratio,
        u.quantity_order,
        coalesce(least(lo_first.first_layer, ln_first.first_layer), -1) as group_order
    from paired as p
    inner join units as u on u.quantity = p.quantity
    left join group_layers as lo on lo.model = $old and lo.template is not distinct from p.template and p.scope = 'group'
    left join group_layers as ln on ln.model = $new and ln.template is not distinct from p.template and p.scope = 'group'
    left join (
        select model, template, min(layer) as first_layer from base_layer_schedule group by model, template
    ) as lo_first on lo_first.model = $old and lo_first.template = p.template
    left join (
        select model, template, min(layer) as first_layer from base_layer_schedule group by model, template
    ) as ln_first on ln_first.model = $new and ln_first.template = p.template
)

select
    scope,
    template,
    layers_old,
    layers_new,
    quantity,
    unit,
    old,
    new,
    delta,
    ratio
from joined
order by scope = 'model', group_order, template, quantity_order
