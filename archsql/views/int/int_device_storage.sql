-- Bytes one device of every deployment holds of every stored tensor of a model (data parts,
-- quant siblings such as block scales, buffers) in the deployment's weight profile, read
-- through the layouts: each stored axis that follows a split weight axis keeps
-- ceil(device's slab / divisor) of it, and routed experts keep their share of copies.
with

deployments as (
    select
        deployment,
        weight_profile
    from base_deployments
),

groups as (
    select
        deployment,
        "group",
        degree
    from int_deployment_groups
),

stored as (
    select
        model,
        profile,
        uid,
        tensor,
        part,
        name,
        layers,
        dtype,
        shape,
        axis_map,
        bits,
        copies_per_layer,
        copies,
        contains(name, '{expert}') as per_expert
    from int_storage_bytes
),

weights as (
    select
        model,
        uid,
        tensor,
        shape as weight_shape
    from base_weights
),

-- the split axes of every weight (weights are placed once; the prefill rows say how)
weight_splits as (
    select
        l.model,
        l.uid,
        l.tensor,
        l.axis,
        l."group",
        l.parts,
        l.segments
    from base_layouts as l
    inner join weights as w on w.model = l.model and w.uid = l.uid and w.tensor = l.tensor
    where l.phase = 'prefill' and l.placement = 'S' and l.axis >= 0
),

copy_splits as (
    select
        model,
        uid,
        "group",
        parts
    from base_layouts
    where phase = 'prefill' and tensor = 'copies'
),

-- one row per stored tensor, deployment and stored axis
stored_axes as (
    select
        s.model,
        d.deployment,
        s.uid,
        s.tensor,
        s.part,
        s.name,
        s.layers,
        s.dtype,
        s.bits,
        s.copies_per_layer,
        s.copies,
        s.per_expert,
        w.weight_shape,
        unnest(range(len(s.shape))) as i,
        unnest(s.shape) as size,
        unnest(s.axis_map) as source
    from stored as s
    inner join deployments as d on d.weight_profile = s.profile
    left join weights as w on w.model = s.model and w.uid = s.uid and w.tensor = s.tensor
),

local_axes as (
    select
        a.model,
        a.deployment,
        a.uid,
        a.tensor,
        a.part,
        a.name,
        a.layers,
        a.dtype,
        a.bits,
        a.copies_per_layer,
        a.copies,
        a.per_expert,
        a.i,
        case
            when a.source.axis = -1 and cg.degree is not null
                then shard_local(a.size, c.parts, null, cg.degree)
            when a.source.axis >= 0 and g.degree is not null
                then ceil(
                    shard_local(a.weight_shape[a.source.axis + 1], ws.parts, ws.segments, g.degree) / a.source.divisor
                )
            else a.size
        end as local_size
    from stored_axes as a
    left join weight_splits as ws
        on ws.model = a.model and ws.uid = a.uid and ws.tensor = a.tensor and ws.axis = a.source.axis
    left join groups as g on g.deployment = a.deployment and g."group" = ws."group"
    left join copy_splits as c on c.model = a.model and c.uid = a.uid
    left join groups as cg on cg.deployment = a.deployment and cg."group" = c."group"
),

per_tensor as (
    select
        model,
        deployment,
        uid,
        tensor,
        part,
        name,
        layers,
        any_value(dtype) as dtype,
        any_value(bits) as bits,
        any_value(copies_per_layer) as copies_per_layer,
        any_value(copies) as copies,
        any_value(per_expert) as per_expert,
        product(local_size) as elements
    from local_axes
    group by model, deployment, uid, tensor, part, name, layers
),

-- a scalar (a per-tensor scale) has no axes: one element on every device
scalars as (
    select
        s.model,
        d.deployment,
        s.uid,
        s.tensor,
        s.part,
        s.name,
        s.layers,
        s.dtype,
        s.bits,
        s.copies_per_layer,
        s.copies,
        s.per_expert,
        1 as elements
    from stored as s
    inner join deployments as d on d.weight_profile = s.profile
    where len(s.shape) = 0
),

all_tensors as (
    select model, deployment, uid, tensor, part, name, layers, dtype, bits, copies_per_layer, copies, per_expert, elements
    from per_tensor
    union all
    select model, deployment, uid, tensor, part, name, layers, dtype, bits, copies_per_layer, copies, per_expert, elements
    from scalars
),

-- routed experts stored one tensor per expert: a device keeps its experts' copies
with_copies as (
    select
        t.model,
        t.deployment,
        t.uid,
        t.tensor,
        t.part,
        t.name,
        t.layers,
        t.dtype,
        t.elements,
        t.elements * t.bits / 8 as bytes,
        case
            when t.per_expert and cg.degree is not null
                then t.copies // t.copies_per_layer * shard_local(t.copies_per_layer, c.parts, null, cg.degree)
            else t.copies
        end as copies
    from all_tensors as t
    left join copy_splits as c on c.model = t.model and c.uid = t.uid
    left join groups as cg on cg.deployment = t.deployment and cg."group" = c."group"
)

select
    model,
    deployment,
    uid,
    tensor,
    part,
    name,
    layers,
    dtype,
    elements,
    bytes,
    copies,
    bytes * copies as total_bytes
from with_copies
