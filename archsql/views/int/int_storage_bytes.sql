-- Bytes of every stored tensor template: elements of its stored shape × bits of its dtype / 8,
-- and the copies it covers in the model: the layers of the row × the node's copies per layer
-- when the name has an {expert} placeholder (a stacked experts tensor holds them all).
with

storage as (
    select * from base_storage_tensors
),

dtypes as (
    select * from base_storage_dtypes
),

nodes as (
    select * from base_nodes
),

instances as (
    select * from base_instances
),

template_layers as (
    select * from int_template_layers
),

joined as (
    select
        s.*,
        n.role,
        coalesce(list_product(s.shape), 1)::bigint as elements,
        d.bits,
        i.count // coalesce(t.layers, 1) as copies_per_layer,
        coalesce(array_length(s.layers), 1) as row_layers
    from storage as s
    left join dtypes as d on d.dtype = s.dtype
    left join nodes as n on n.model = s.model and n.uid = s.uid
    left join template_layers as t on t.model = n.model and t.stack = n.stack and t.template = n.template
    left join instances as i on i.model = s.model and i.uid = s.uid
),

with_bytes as (
    select
        *,
        case when part = 'data' then elements * packing end as logical_elements,
        elements * bits // 8 as bytes,
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
