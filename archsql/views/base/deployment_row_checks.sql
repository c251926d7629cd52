-- Rows of deployments and deployment_mesh whose own values break a rule — sizes a view would
-- divide by or overflow on — one row each with its first problem (parameter_checks and
-- deployment_checks list them with the rules that compare a deployment with other tables;
-- the answering views leave their deployments out, int_deployment_axes their degrees).
with

-- the physical bound of a GPU count or a degree (the macro: 2^20)
bounds as (
    select max_degree() as max_gpus
),

deployments as (
    select
        deployment,
        gpus,
        nodes,
        usable_memory_fraction,
        speculative_tokens
    from deployments
),

mesh as (
    select
        deployment,
        axis,
        degree
    from deployment_mesh
),

deployment_rules as (
    select
        deployment,
        deployment as row_key,
        'deployments' as parameter_table,
        case
            when gpus is null or gpus < 1 or gpus > max_gpus then 'degrees'
            when nodes < 1 or gpus % greatest(nodes, 1) <> 0 then 'nodes'
            when not (usable_memory_fraction > 0 and usable_memory_fraction <= 1) then 'memory fraction'
            when speculative_tokens < 0 then 'speculative tokens'
        end as rule,
        case
            when gpus is null or gpus < 1 or gpus > max_gpus
                then format('gpus {} is outside 1 .. {}', coalesce(gpus::varchar, 'null'), max_gpus)
            when nodes < 1 or gpus % greatest(nodes, 1) <> 0 then format('{} GPUs on {} nodes', gpus, nodes)
            when not (usable_memory_fraction > 0 and usable_memory_fraction <= 1)
                then format('usable_memory_fraction {} is outside (0, 1]', usable_memory_fraction)
            when speculative_tokens < 0 then format('speculative_tokens {} is below 0', speculative_tokens)
        end as problem,
        case
            when gpus is null or gpus < 1 or gpus > max_gpus
                then format('gpus counts the GPUs of the deployment: 1 .. {}', max_gpus)
            when nodes < 1 or gpus % greatest(nodes, 1) <> 0
                then 'nodes is at least 1 and divides gpus (or null: derived from the GPU''s scale-up domain)'
            when not (usable_memory_fraction > 0 and usable_memory_fraction <= 1)
                then 'use a fraction such as 0.9 (null: the framework''s default)'
            when speculative_tokens < 0 then 'draft tokens per decode step: 0 or more (null: no MTP)'
        end as fix
    from deployments
    cross join bounds
),

mesh_rules as (
    select
        deployment,
        deployment || ', ' || axis as row_key,
        'deployment_mesh' as parameter_table,
        'degrees' as rule,
        format('{} degree {} is outside 1 .. {}', axis, coalesce(degree::varchar, 'null'), max_gpus) as problem,
        'every degree is at least 1 (and at most the GPUs)' as fix
    from mesh
    cross join bounds
    where degree is null or degree < 1 or degree > max_gpus
),

problems as (
    select * from deployment_rules
    where rule is not null
    union all
    select * from mesh_rules
)

select
    parameter_table,
    row_key,
    'deployment' as entity,
    deployment as name,
    rule,
    problem,
    fix
from problems
