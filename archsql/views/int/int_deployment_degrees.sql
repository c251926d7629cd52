-- The degree of every mesh axis of every deployment, one column per axis.
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
    any_value(degree) filter (where axis = 'tp') as tp,
    any_value(degree) filter (where axis = 'dp') as dp,
    any_value(degree) filter (where axis = 'ep') as ep,
    any_value(degree) filter (where axis = 'moe_tp') as moe_tp,
    any_value(degree) filter (where axis = 'pp') as pp,
    any_value(degree) filter (where axis = 'cp') as cp
from degrees
group by deployment
