-- The degree of every mesh axis of every deployment: its mesh row, or the axis's default.
-- A degree outside 1 .. max_degree() (2^20; deployment_row_checks) is left out here, where every degree
-- enters the views, so no view divides by it or overflows on it; the answering views leave
-- its deployment out (deployment_checks).
with

deployments as (
    select deployment
    from base_deployments
),

degrees as (
    select
        deployment,
        axis,
        degree
    from parameter_degrees
    where degree between 1 and max_degree()
)

select
    g.deployment,
    g.axis,
    g.degree
from degrees as g
inner join deployments as d on d.deployment = g.deployment
