-- How every weight tensor is stored: its logical elements, scheme, stored dtype and shape, the
-- sibling tensors of its scheme with their shapes and bytes, and the bytes of all its copies.
with

stored as (
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
        logical_elements,
        bytes,
        copies
    from int_storage_bytes
),

primary_parts as (
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
        logical_elements,
        bytes,
        copies
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
        p.model,
        p.profile,
        p.uid,
        p.role,
        p.tensor,
        p.part = 'buffer' as is_buffer,
        p.name,
        p.layers,
        p.logical_elements as elements,
        p.scheme,
        p.rule,
        p.dtype,
        p.shape,
        p.packing,
        p.bytes as data_bytes,
        coalesce(s.sibling_bytes, 0) as sibling_bytes,
        s.siblings,
        p.copies
    from primary_parts as p
    left join siblings as s
        on s.model = p.model and s.profile = p.profile and s.uid = p.uid and s.tensor = p.tensor
        and s.layers is not distinct from p.layers
),

with_totals as (
    select
        model,
        profile,
        uid,
        role,
        tensor,
        is_buffer,
        name,
        layers,
        elements,
        scheme,
        rule,
        dtype,
        shape,
        packing,
        data_bytes,
        sibling_bytes,
        siblings,
        data_bytes + sibling_bytes as bytes_per_copy,
        copies,
        (data_bytes + sibling_bytes) * copies as total_bytes,
        8.0 * (data_bytes + sibling_bytes) / elements as bits_per_element
    from joined
)

select
    model,
    profile,
    uid,
    role,
    tensor,
    is_buffer,
    name,
    layers,
    elements,
    scheme,
    rule,
    dtype,
    shape,
    packing,
    data_bytes,
    sibling_bytes,
    siblings,
    bytes_per_copy,
    copies,
    total_bytes,
    bits_per_element
from with_totals
