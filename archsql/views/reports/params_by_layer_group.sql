-- Parameters and stored weight bytes of every layer group (block template) of every model.
with

node_params as (
    select * from int_node_params
),

nodes as (
    select * from base_nodes
),

stored as (
    select
        model,
        uid,
        total_bytes
    from weight_storage
    where profile = 'native' and not is_buffer
),

layers_per_template as (
    select * from int_template_layers
),

params_per_group as (
    select
        n.model,
        n.stack,
        n.template,
        sum(p.params)::bigint as params,
        sum(p.active_params)::bigint as active_params
    from node_params as p
    inner join nodes as n on n.model = p.model and n.uid = p.uid
    group by n.model, n.stack, n.template
),

bytes_per_group as (
    select
        n.model,
        n.stack,
        n.template,
        sum(s.total_bytes) as weight_bytes
    from stored as s
    inner join nodes as n on n.model = s.model and n.uid = s.uid
    group by n.model, n.stack, n.template
),

joined as (
    select
        p.model,
        p.stack,
        p.template,
        l.layers,
        p.params,
        p.active_params,
        p.params / coalesce(l.layers, 1) as params_per_layer,
        coalesce(b.weight_bytes, 0) as weight_bytes,
        coalesce(b.weight_bytes, 0) / coalesce(l.layers, 1) as weight_bytes_per_layer
    from params_per_group as p
    left join bytes_per_group as b
        on b.model = p.model and b.stack is not distinct from p.stack and b.template is not distinct from p.template
    left join layers_per_template as l
        on l.model = p.model and l.stack is not distinct from p.stack and l.template is not distinct from p.template
)

select
    model,
    stack,
    template,
    layers,
    params,
    active_params,
    params_per_layer,
    weight_bytes,
    weight_bytes_per_layer
from joined
