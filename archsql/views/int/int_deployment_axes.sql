-- The degree of every mesh axis of every deployment: its mesh row, or the axis's default.
with

deployments as (
    select deployment
    from base_deployments
),

axes as (
    select distinct
        axis,
        default_degree
    from base_parallel_groups
),

mesh as (
    select
        deployment,
        axis,
        degree
    from base_deployment_mesh
),

-- an axis with no mesh row has its default degree
degrees as (
    select
        d.deployment,
        a.axis,
        case when m.axis is null then a.default_degree else m.degree end as degree
    from deployments as d
    cross join axes as a
    left join mesh as m on m.deployment = d.deployment and m.axis = a.axis
)

select
    deployment,
    axis,
    degree
from degrees
