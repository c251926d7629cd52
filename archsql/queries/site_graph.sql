-- The evaluated graph per node (prefill): stack, layer group (and its layer count), component, op, output shape, inputs, parameters and FLOP formulas.
with
nodes as (
    select model, uid, stack, template, component, path, op, role, decode_op, in_prefill, in_decode
    from base_nodes
),

params as (
    select model, uid, count, params
    from int_node_params
),

schedule as (
    select model, stack, template, count(*) as layers
    from base_layer_schedule
    group by model, stack, template
),

instances as (
    select model, uid, count
    from base_instances
),

shapes as (
    select
        model,
        uid,
        string_agg(coalesce(cast(size as varchar), symbol, dim), ' × ' order by axis) as output_shape
    from base_shapes
    where phase = 'prefill'
    group by model, uid
),

inputs as (
    select
        model,
        dst_uid as uid,
        string_agg(coalesce(src_uid, '(input)'), ', ' order by port, src_uid) as inputs
    from base_edges
    where phase = 'prefill'
    group by model, dst_uid
),

flops as (
    select model, uid, symbolic as flops_symbolic, bound as flops_bound
    from formulas
    where phase = 'prefill' and quantity = 'flops'
)

select
    n.model,
    n.uid,
    n.stack,
    n.template,
    l.layers as template_layers,
    n.component,
    n.path,
    n.op,
    n.role,
    n.decode_op,
    n.in_prefill,
    n.in_decode,
    i.count as instances,
    p.params,
    s.output_shape,
    e.inputs,
    f.flops_symbolic,
    f.flops_bound
from nodes as n
left join schedule as l on l.model = n.model and l.stack = n.stack and l.template = n.template
left join instances as i on i.model = n.model and i.uid = n.uid
left join params as p on p.model = n.model and p.uid = n.uid
left join shapes as s on s.model = n.model and s.uid = n.uid
left join inputs as e on e.model = n.model and e.uid = n.uid
left join flops as f on f.model = n.model and f.uid = n.uid
order by n.model, n.stack nulls first, n.template nulls first, n.component, n.uid
