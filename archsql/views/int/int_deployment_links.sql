-- Where the devices of every parallel group sit: members per node, and whether it crosses nodes.
with

groups as (
    select *
    from int_deployment_groups
),

deployments as (
    select
        deployment,
        tp,
        cp,
        moe_tp
    from int_deployment_degrees
),

mesh as (
    select
        deployment,
        gpus_per_node,
        stage_gpus
    from int_deployment_mesh
),

-- GPUs between consecutive members: pp outermost, then dp, cp, tp innermost (experts: ep
-- outer, moe_tp inner)
strided as (
    select
        g.deployment,
        g."group",
        g.degree,
        case
            when g."group" in ('cp', 'cp_ulysses', 'cp_ring') then d.tp
            when g."group" = 'dp' then d.tp * d.cp
            when g."group" = 'moe_ep' then d.moe_tp
            when g."group" = 'pp' then m.stage_gpus
            else 1
        end as stride,
        m.gpus_per_node
    from groups as g
    inner join deployments as d on d.deployment = g.deployment
    inner join mesh as m on m.deployment = g.deployment
),

placed as (
    select
        deployment,
        "group",
        degree,
        stride,
        case
            when degree * stride <= gpus_per_node then degree
            when stride >= gpus_per_node then 1
            else greatest(floor(gpus_per_node / stride), 1)::bigint  -- a count of devices: an integer
        end as members_per_node
    from strided
)

select
    deployment,
    "group",
    degree,
    stride,
    members_per_node,
    members_per_node < degree as crosses_nodes
from placed
