-- How every weight tensor is stored: its logical elements, scheme, stored dtype and shape, the
-- sibling tensors of its scheme with their shapes and bytes, and the bytes of all its copies.
with

stored as (
    select * exclude (total_bytes)  -- of one stored part; the totals below add the siblings
    from int_storage_bytes
),

primary_parts as (
    select *
    from stored
    where part in ('data', 'buffer')
),

siblings as (
    select
        model,
        profile,
        uid,
        tensor,
        layers,
        list(
            struct_pack(part := part, name := name, dtype := dtype, shape := shape, bytes := bytes) order by part
        ) as siblings,
        sum(bytes)::bigint as sibling_bytes
    from stored
    where part not in ('data', 'buffer')
    group by model, profile, uid, tensor, layers
),

joined as (
    select
        p.*,
        coalesce(s.sibling_bytes, 0) as sibling_bytes,
        s.siblings
    from primary_parts as p
    left join siblings as s
        on s.model = p.model and s.profile = p.profile and s.uid = p.uid and s.tensor = p.tensor
        and s.layers is not distinct from p.layers
),

with_totals as (
    select
        *,
        bytes + sibling_bytes as bytes_per_copy,
        (bytes + sibling_bytes) * copies as total_bytes,
        8.0 * (bytes + sibling_bytes) / logical_elements as bits_per_element
    from joined
)

select
    model,
    profile,
    uid,
    role,
    tensor,
    part = 'buffer' as is_buffer,
    name,
    layers,
    logical_elements as elements,
    scheme,
    rule,
    dtype,
    shape,
    packing,
    bytes as data_bytes,
    sibling_bytes,
    siblings,
    bytes_per_copy,
    copies,
    total_bytes,
    bits_per_element
from with_totals
