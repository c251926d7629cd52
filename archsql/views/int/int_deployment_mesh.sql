-- Where the GPUs of every deployment sit: nodes, GPUs per node, GPUs per pipeline stage.
with

deployments as (
    select
        d.deployment,
        d.gpu,
        d.gpus,
        g.pp,
        d.nodes
    from base_deployments as d
    inner join int_deployment_degrees as g on g.deployment = d.deployment
),

gpus as (
    select
        gpu,
        scaleup_domain_gpus
    from base_gpus
),

placed as (
    select
        d.deployment,
        d.gpu,
        d.gpus,
        g.scaleup_domain_gpus,
        coalesce(d.nodes, ceil(d.gpus / coalesce(g.scaleup_domain_gpus, d.gpus)))::bigint as nodes,
        d.nodes is null as derived,
        d.gpus / d.pp as stage_gpus
    from deployments as d
    left join gpus as g on g.gpu = d.gpu
)

select
    deployment,
    gpu,
    gpus,
    nodes,
    derived,
    gpus / nodes as gpus_per_node,
    stage_gpus,
    scaleup_domain_gpus
from placed
