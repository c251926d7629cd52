-- The degree of every mesh axis of every deployment, one column per axis (int_deployment_axes pivoted).
select
    deployment,
    any_value(degree) filter (where axis = 'tp') as tp,
    any_value(degree) filter (where axis = 'dp') as dp,
    any_value(degree) filter (where axis = 'ep') as ep,
    any_value(degree) filter (where axis = 'moe_tp') as moe_tp,
    any_value(degree) filter (where axis = 'pp') as pp,
    any_value(degree) filter (where axis = 'cp') as cp
from int_deployment_axes
group by deployment
