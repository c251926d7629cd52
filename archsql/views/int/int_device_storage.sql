-- Bytes one device of every deployment holds of every stored tensor of a model (data parts,
-- quant siblings such as block scales, buffers) in the deployment's weight profile, read
-- through the layouts: each stored axis that follows a split weight axis keeps
-- ceil(device's slab / divisor) of it, and routed experts keep their share of copies.
with

deployments as (
    select * from base_deployments
),

groups as (
    select * from int_deployment_groups
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

-- every stored tensor on every deployment that stores weights in its profile
tensors as (
    select
        s.* exclude (profile),
        d.deployment
    from stored as s
    inner join deployments as d on d.weight_profile = s.profile
),

-- one row per stored tensor, deployment and stored axis
stored_axes as (
    select
        t.* exclude (shape, axis_map),
        w.weight_shape,
        unnest(range(array_length(t.shape))) as i,
        unnest(t.shape) as size,
        unnest(t.axis_map) as source
    from tensors as t
    left join weights as w on w.model = t.model and w.uid = t.uid and w.tensor = t.tensor
),

local_axes as (
    select
        a.* exclude (weight_shape, i, size, source),
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

-- the device's elements of a tensor: the product of its local axes
per_tensor as (
    select
        * exclude (local_size),
        product(local_size) as elements
    from local_axes
    group by all
),

-- a scalar (a per-tensor scale) has no axes: one element on every device
scalars as (
    select
        * exclude (shape, axis_map),
        1 as elements
    from tensors
    where array_length(shape) = 0
),

all_tensors as (
    select * from per_tensor
    union all by name
    select * from scalars
),

-- routed experts stored one tensor per expert: a device keeps its experts' copies
with_copies as (
    select
        t.* exclude (copies),
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
