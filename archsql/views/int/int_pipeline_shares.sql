-- The share of every node's copies each pipeline stage holds, in every deployment (a
-- multi-token-prediction node, held where the deployment drafts with it, on the last stage).
with recursive

deployments as (
    select
        deployment,
        pp
    from int_deployment_degrees
),

nodes as (
    select
        model,
        uid,
        stack,
        template
    from base_nodes
    where in_base_model
),

-- multi-token-prediction nodes: they read the last hidden state, so they sit with the head
drafts as (
    select
        model,
        uid
    from base_nodes
    where not in_base_model
),

collectives as (
    select distinct
        model,
        uid,
        consumer_uid
    from base_collectives
),

links as (
    select distinct
        model,
        src_uid,
        dst_uid
    from base_edges
    where src_uid is not null
),

-- nodes outside the stacks that read a stack's output, directly or through each other (the
-- final norm, the head): they run after the stacks, on the last stage; the others before,
-- on the first
after_stacks(model, uid) as (
    select l.model, l.dst_uid
    from links as l
    inner join nodes as s on s.model = l.model and s.uid = l.src_uid and s.stack is not null
    inner join nodes as d on d.model = l.model and d.uid = l.dst_uid and d.stack is null
    union
    select l.model, l.dst_uid
    from links as l
    inner join after_stacks as a on a.model = l.model and a.uid = l.src_uid
    inner join nodes as d on d.model = l.model and d.uid = l.dst_uid and d.stack is null
),

layers as (
    select
        model,
        deployment,
        stack,
        template,
        stage,
        count(*) as layers
    from int_pipeline_layers
    group by model, deployment, stack, template, stage
),

template_layers as (
    select
        model,
        deployment,
        stack,
        template,
        sum(layers) as layers
    from layers
    group by model, deployment, stack, template
),

in_stacks as (
    select
        n.model,
        l.deployment,
        n.uid,
        l.stage,
        l.layers / t.layers as share
    from nodes as n
    inner join layers as l on l.model = n.model and l.stack = n.stack and l.template = n.template
    inner join template_layers as t
        on t.model = l.model and t.deployment = l.deployment and t.stack = l.stack and t.template = l.template
),

outside as (
    select
        n.model,
        d.deployment,
        n.uid,
        case when a.uid is null then 0 else d.pp - 1 end as stage,
        1.0 as share
    from nodes as n
    cross join deployments as d
    left join collectives as c on c.model = n.model and c.uid = n.uid
    left join (select distinct model, uid from after_stacks) as a
        on a.model = n.model and a.uid = coalesce(c.consumer_uid, n.uid)
    where n.stack is null
),

mtp as (
    select
        n.model,
        d.deployment,
        n.uid,
        d.pp - 1 as stage,
        1.0 as share
    from drafts as n
    cross join deployments as d
),

shares as (
    select * from in_stacks
    union all by name
    select * from outside
    union all by name
    select * from mtp
)

select
    model,
    deployment,
    uid,
    stage,
    share
from shares
