-- The degree of every parallel group in every deployment.
with

deployments as (
    select
        deployment,
        tp,
        dp,
        ep,
        moe_tp,
        pp,
        cp,
        cp_kind
    from base_deployments
),

-- the cp_ulysses / cp_ring collectives take the cp degree only for the deployment's cp_kind
-- (a group of one device is free)
groups as (
    select deployment, 'attention' as "group", tp as degree from deployments
    union all
    select deployment, 'ffn' as "group", tp as degree from deployments
    union all
    select deployment, 'cp' as "group", cp as degree from deployments
    union all
    select deployment, 'cp_ulysses' as "group", case when cp_kind = 'ulysses' then cp else 1 end as degree
    from deployments
    union all
    select deployment, 'cp_ring' as "group", case when cp_kind = 'ring' then cp else 1 end as degree
    from deployments
    union all
    select deployment, 'dp' as "group", dp as degree from deployments
    union all
    select deployment, 'moe_ep' as "group", ep as degree from deployments
    union all
    select deployment, 'moe_tp' as "group", moe_tp as degree from deployments
    union all
    select deployment, 'pp' as "group", pp as degree from deployments
)

select
    deployment,
    "group",
    degree
from groups
