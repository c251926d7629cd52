-- Weight elements one device of each deployment holds, per weight tensor.
with

weights as (
    select * from base_weights
),

instances as (
    select * from base_instances
),

nodes as (
    select * from base_nodes
),

groups as (
    select * from int_deployment_groups
),

-- groups splitting a weight: its sharded axes and its node's copies (routed experts over EP)
weight_groups as (
    select
        l.model,
        l.uid,
        w.tensor,
        l."group",
        max(l.parts) as parts,
        any_value(l.segments) as segments
    from base_layouts as l
    inner join weights as w on w.model = l.model and w.uid = l.uid and (l.tensor = w.tensor or l.tensor = 'copies')
    where l.phase = 'prefill' and l.placement = 'S'
    group by l.model, l.uid, w.tensor, l."group"
),

-- the fullest device holds ceil(parts / degree) whole parts (the fit rule, shard_divisor)
divisors as (
    select
        wg.model,
        wg.uid,
        wg.tensor,
        g.deployment,
        product(shard_divisor(wg.parts, wg.segments, g.degree)) as divisor
    from weight_groups as wg
    inner join groups as g on g."group" = wg."group"
    group by wg.model, wg.uid, wg.tensor, g.deployment
),

-- bytes as stored in the deployment's weight profile: the data part and every sibling (scales)
stored as (
    select
        model,
        deployment,
        uid,
        tensor,
        sum(total_bytes) as bytes
    from int_device_storage
    group by model, deployment, uid, tensor
),

per_device as (
    select
        w.model,
        d.deployment,
        w.uid,
        w.tensor,
        n.role,
        n.in_base_model,
        w.streamed,
        w.elements * i.count / coalesce(dv.divisor, 1) as elements,
        st.bytes
    from weights as w
    inner join instances as i on i.model = w.model and i.uid = w.uid
    inner join nodes as n on n.model = w.model and n.uid = w.uid
    cross join (select distinct deployment from groups) as d
    left join divisors as dv
        on dv.model = w.model and dv.uid = w.uid and dv.tensor = w.tensor and dv.deployment = d.deployment
    left join stored as st
        on st.model = w.model and st.uid = w.uid and st.tensor = w.tensor and st.deployment = d.deployment
)

select
    model,
    deployment,
    uid,
    tensor,
    role,
    in_base_model,
    streamed,
    elements,
    bytes
from per_device
