-- The degree of every mesh axis of every row of the deployments table, valid or not: its
-- deployment_mesh row, or the axis's default.  Read by parameter_checks (which judges the
-- degrees) and, for the valid deployments, by int_deployment_axes.
with

deployments as (
    select deployment
    from deployments
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
    from deployment_mesh
)

-- an axis with no mesh row has its default degree
select
    d.deployment,
    a.axis,
    case when m.axis is null then a.default_degree else m.degree end as degree
from deployments as d
cross join axes as a
left join mesh as m on m.deployment = d.deployment and m.axis = a.axis
