-- Per-device shape of every node output and weight tensor, one row per axis, for every
-- model × deployment × workload: the global size (bound at the workload) read through the
-- layout.  Dims stay global; a split axis holds whole parts on the fullest device, a fused
-- axis (segments side by side) the whole parts of each segment.
with

shapes as (
    select
        model,
        phase,
        uid,
        axis,
        dim,
        size,
        symbol
    from base_shapes
),

weights as (
    select
        model,
        uid,
        tensor,
        shape
    from base_weights
),

node_phases as (
    select distinct
        model,
        phase,
        uid
    from shapes
),

weight_axes as (
    select
        w.model,
        p.phase,
        w.uid,
        w.tensor,
        generate_subscripts(w.shape, 1) - 1 as axis,
        unnest(w.shape) as size
    from weights as w
    inner join node_phases as p on p.model = w.model and p.uid = w.uid
),

axes as (
    select
        model,
        phase,
        uid,
        'out' as tensor,
        axis,
        dim,
        size,
        symbol
    from shapes
    union all
    select
        model,
        phase,
        uid,
        tensor,
        axis,
        null as dim,
        size,
        null as symbol
    from weight_axes
),

-- the runtime symbols of a workload: B requests, s new tokens, c context, v image patches
workloads as (
    select *
    from int_workload_inputs
),

groups as (
    select *
    from int_deployment_groups
),

splits as (
    select
        model,
        phase,
        uid,
        tensor,
        axis,
        "group",
        parts,
        segments
    from base_layouts
    where placement = 'S' and axis >= 0
),

deployments as (
    select distinct deployment
    from groups
),

bound as (
    select
        a.model,
        d.deployment,
        w.workload,
        a.phase,
        a.uid,
        a.tensor,
        a.axis,
        a.dim,
        -- a runtime axis is a symbol, or a symbol times / divided by a whole number ('v/4')
        coalesce(
            a.size,
            case regexp_extract(a.symbol, '[A-Za-z_]+')
                when 'B' then w.batch
                when 's' then w.new_tokens
                when 'c' then w.context
                when 'v' then w.image_patches
            end
            * coalesce(try_cast(regexp_extract(a.symbol, '^([0-9]+)\*', 1) as bigint), 1)
            // coalesce(try_cast(regexp_extract(a.symbol, '/([0-9]+)$', 1) as bigint), 1)
        ) as size,
        x."group",
        coalesce(g.degree, 1) as degree,
        x.parts,
        x.segments
    from axes as a
    inner join workloads as w on w.phase = a.phase
    cross join deployments as d
    -- an axis is split by at most one group (base_layouts: one_group_per_axis)
    left join splits as x
        on x.model = a.model and x.phase = a.phase and x.uid = a.uid and x.tensor = a.tensor and x.axis = a.axis
    left join groups as g on g.deployment = d.deployment and g."group" = x."group"
),

per_device as (
    select
        * exclude (segments),
        -- the fit rule (shard_local), the fullest device: an even split rounds up (one request)
        case when "group" is null then size else ceil(shard_local(size, parts, segments, degree))::bigint end
            as device_size
    from bound
)

select
    model,
    deployment,
    workload,
    phase,
    uid,
    tensor,
    axis,
    dim,
    size,
    "group",
    degree,
    parts,
    device_size,
    -- every device of the group holds the same share: no whole part replicated, no remainder
    device_size * degree = size or "group" is null as even
from per_device
