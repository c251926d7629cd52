-- Parameters of each node that has weights: elements per instance times its copies.
with

weights as (
    select * from base_weights
),

instances as (
    select * from base_instances
),

nodes as (
    select * from base_nodes
),

elements_per_node as (
    select
        model,
        uid,
        sum(elements)::bigint as elements
    from weights
    group by model, uid
),

joined as (
    select
        e.model,
        e.uid,
        n.role,
        n.in_base_model,
        e.elements,
        i.count,
        i.active_count
    from elements_per_node as e
    left join instances as i on i.model = e.model and i.uid = e.uid
    left join nodes as n on n.model = e.model and n.uid = e.uid
),

with_params as (
    select
        *,
        elements * count as params,
        case when in_base_model then elements * active_count else 0 end as active_params
    from joined
)

select
    model,
    uid,
    role,
    in_base_model,
    elements,
    count,
    active_count,
    params,
    active_params
from with_params
