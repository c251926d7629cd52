-- The pipeline stage of every layer of the base model in every deployment.
with

deployments as (
    select
        deployment,
        pp
    from int_deployment_degrees
),

stacks as (
    select
        model,
        stack,
        first_layer
    from base_stacks
    where role <> 'mtp'
),

schedule as (
    select
        model,
        stack,
        layer,
        template
    from base_layer_schedule
),

-- the base model's layers in order, stack after stack
ordered as (
    select
        s.model,
        s.stack,
        s.layer,
        s.template,
        row_number() over (partition by s.model order by st.first_layer, s.stack, s.layer) - 1 as position,
        count(*) over (partition by s.model) as layers
    from schedule as s
    inner join stacks as st on st.model = s.model and st.stack = s.stack
),

-- vLLM's get_pp_indices: layers // pp per stage; the remainder adds one layer each to the
-- stages just before the last (the last also holds the final norm and the head), so stages
-- 0 .. pp-2-extra hold base layers, pp-1-extra .. pp-2 base + 1, the last base
cut as (
    select
        o.model,
        d.deployment,
        o.stack,
        o.layer,
        o.template,
        o.position,
        d.pp,
        o.layers // d.pp as base,
        o.layers % d.pp as extra
    from ordered as o
    cross join deployments as d
),

staged as (
    select
        * exclude (pp, base, extra),
        case
            when position < (pp - 1 - extra) * base then position // base
            when position < (pp - 1 - extra) * base + extra * (base + 1)
                then pp - 1 - extra + (position - (pp - 1 - extra) * base) // (base + 1)
            else pp - 1
        end as stage
    from cut
)

select
    model,
    deployment,
    stack,
    layer,
    template,
    position,
    stage
from staged
