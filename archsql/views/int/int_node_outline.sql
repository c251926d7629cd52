-- How a node reads in a graph listing: the layer count of its layer group and its output
-- shape as text (the prefill shape, axis by axis: a size, else its symbol, else its dim).
with

nodes as (
    select model, uid, stack, template
    from base_nodes
),

schedule as (
    select model, stack, template, count(*) as layers
    from base_layer_schedule
    group by model, stack, template
),

shapes as (
    select
        model,
        uid,
        string_agg(coalesce(cast(size as varchar), symbol, dim), ' × ' order by axis) as output_shape
    from base_shapes
    where phase = 'prefill'
    group by model, uid
)

select
    n.model,
    n.uid,
    l.layers as template_layers,
    s.output_shape
from nodes as n
left join schedule as l on l.model = n.model and l.stack = n.stack and l.template = n.template
left join shapes as s on s.model = n.model and s.uid = n.uid
