-- The layers each pipeline stage of every deployment holds, for every model.
with

deployments as (
    select
        deployment,
        pp
    from int_deployment_degrees as d
    where not exists (select 1 from deployment_checks as x where x.deployment = d.deployment)
),

models as (
    select model
    from base_models
),

layers as (
    select
        model,
        deployment,
        layer,
        stage
    from int_pipeline_layers
),

stages as (
    select
        m.model,
        d.deployment,
        d.pp,
        s.stage
    from models as m
    cross join deployments as d
    cross join range(0, 1024) as s (stage)
    where s.stage < d.pp
),

counted as (
    select
        s.model,
        s.deployment,
        s.pp,
        s.stage,
        count(l.layer) as layers,
        min(l.layer) as first_layer,
        max(l.layer) as last_layer
    from stages as s
    left join layers as l on l.model = s.model and l.deployment = s.deployment and l.stage = s.stage
    group by s.model, s.deployment, s.pp, s.stage
)

select
    model,
    deployment,
    pp,
    stage,
    layers,
    first_layer,
    last_layer,
    layers = 0 as empty
from counted
