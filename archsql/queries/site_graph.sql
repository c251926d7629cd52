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

outline as (
    select model, uid, template_layers, output_shape
    from int_node_outline
),

instances as (
    select model, uid, count
    from base_instances
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
    o.template_layers,
    n.component,
    n.path,
    n.op,
    n.role,
    n.decode_op,
    n.in_prefill,
    n.in_decode,
    i.count as instances,
    p.params,
    o.output_shape,
    e.inputs,
    f.flops_symbolic,
    f.flops_bound
from nodes as n
left join outline as o on o.model = n.model and o.uid = n.uid
left join instances as i on i.model = n.model and i.uid = n.uid
left join params as p on p.model = n.model and p.uid = n.uid
left join inputs as e on e.model = n.model and e.uid = n.uid
left join flops as f on f.model = n.model and f.uid = n.uid
order by n.model, n.stack nulls first, n.template nulls first, n.component, n.uid
