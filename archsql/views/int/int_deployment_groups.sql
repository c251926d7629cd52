-- The degree of every parallel group in every deployment: the degree of the mesh axis that sizes it.
with

deployments as (
    select
        deployment,
        cp_kind
    from base_deployments
),

parallel_groups as (
    select
        "group",
        axis,
        cp_kind
    from base_parallel_groups
),

axes as (
    select *
    from int_deployment_axes
),

-- the cp_ulysses / cp_ring collectives take the cp degree only for the deployment's cp_kind
-- (a group of one device is free)
groups as (
    select
        d.deployment,
        p."group",
        case when p.cp_kind is not null and p.cp_kind is distinct from d.cp_kind then 1 else a.degree end as degree
    from deployments as d
    cross join parallel_groups as p
    inner join axes as a on a.deployment = d.deployment and a.axis = p.axis
)

select
    deployment,
    "group",
    degree
from groups
