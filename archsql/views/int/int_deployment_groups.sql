-- The degree of every parallel group in every deployment.
with

deployments as (
    select
        deployment,
        tp,
        dp,
        ep,
        moe_tp
    from base_deployments
),

groups as (
    select deployment, 'attention' as "group", tp as degree from deployments
    union all
    select deployment, 'ffn' as "group", tp as degree from deployments
    union all
    select deployment, 'dp' as "group", dp as degree from deployments
    union all
    select deployment, 'moe_ep' as "group", ep as degree from deployments
    union all
    select deployment, 'moe_tp' as "group", moe_tp as degree from deployments
)

select
    deployment,
    "group",
    degree
from groups
