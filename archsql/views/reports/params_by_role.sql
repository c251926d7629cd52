-- Parameters of each model broken down by node role.
with

node_params as (
    select * from int_node_params
),

params_per_role as (
    select
        model,
        role,
        sum(params)::bigint as params,
        sum(active_params)::bigint as active_params
    from node_params
    group by model, role
),

with_share as (
    select
        *,
        params / nullif(sum(params) over (partition by model), 0) as share_of_params
    from params_per_role
)

select
    model,
    role,
    params,
    active_params,
    share_of_params
from with_share
