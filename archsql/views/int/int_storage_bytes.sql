-- Bytes of every stored tensor template: elements of its stored shape × bits of its dtype / 8,
-- and the copies it covers in the model: the layers of the row × the node's copies per layer
-- when the name has an {expert} placeholder (a stacked experts tensor holds them all).
with

storage as (
    select
        model,
        profile,
        uid,
        tensor,
        part,
        name,
        layers,
        scheme,
        rule,
        dtype,
        shape,
        packing,
        axis_map
    from base_storage_tensors
),

dtypes as (
    select
        dtype,
        bits
    from base_storage_dtypes
),

nodes as (
    select
        model,
        uid,
        stack,
        template,
        role
    from base_nodes
),

instances as (
    select
        model,
        uid,
        count
    from base_instances
),

template_layers as (
    select
        model,
        stack,
        template,
        count(*) as layers
    from base_layer_schedule
    group by model, stack, template
),

joined as (
    select
        s.model,
        s.profile,
        s.uid,
        n.role,
        s.tensor,
        s.part,
        s.name,
        s.layers,
        s.scheme,
        s.rule,
        s.dtype,
        s.shape,
        s.packing,
        s.axis_map,
        coalesce(list_product(s.shape), 1)::bigint as elements,
        d.bits,
        i.count // coalesce(t.layers, 1) as copies_per_layer,
        coalesce(len(s.layers), 1) as row_layers
    from storage as s
    left join dtypes as d on d.dtype = s.dtype
    left join nodes as n on n.model = s.model and n.uid = s.uid
    left join template_layers as t on t.model = n.model and t.stack = n.stack and t.template = n.template
    left join instances as i on i.model = s.model and i.uid = s.uid
),

with_bytes as (
    select
        model,
        profile,
        uid,
        role,
        tensor,
        part,
        name,
        layers,
        scheme,
        rule,
        dtype,
        shape,
        packing,
        axis_map,
        elements,
        bits,
        case when part = 'data' then elements * packing end as logical_elements,
        elements * bits // 8 as bytes,
        copies_per_layer,
        row_layers * (case when contains(name, '{expert}') then copies_per_layer else 1 end) as copies
    from joined
)

select
    model,
    profile,
    uid,
    role,
    tensor,
    part,
    name,
    layers,
    scheme,
    rule,
    dtype,
    shape,
    packing,
    axis_map,
    elements,
    logical_elements,
    bits,
    bytes,
    copies_per_layer,
    copies,
    bytes * copies as total_bytes
from with_bytes
