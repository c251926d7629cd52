-- Point-to-point sends at every pipeline stage boundary, per device: every value that a
-- later stage reads and an earlier stage produced (the residual stream, internal and append
-- streams).
with

-- only pipelines have boundaries
deployments as (
    select
        deployment,
        pp
    from int_deployment_degrees
    where pp > 1
),

layers as (
    select
        l.model,
        l.deployment,
        l.stack,
        l.layer,
        l.template,
        l.position,
        l.stage
    from int_pipeline_layers as l
    inner join deployments as d on d.deployment = l.deployment
),

mesh as (
    select
        deployment,
        gpus_per_node,
        stage_gpus
    from int_deployment_mesh
),

groups as (
    select *
    from int_deployment_groups
),

streams as (
    select
        model,
        stack,
        stream,
        kind,
        producers
    from base_streams
),

stream_reads as (
    select
        model,
        stream,
        stack,
        layer,
        element_layers
    from base_stream_reads
),

nodes as (
    select
        model,
        uid,
        template
    from base_nodes
    where in_base_model
),

-- the last layer of every stage but the last: the boundary after it
boundaries as (
    select
        l.model,
        l.deployment,
        l.stage,
        max(l.position) as position
    from layers as l
    inner join deployments as d on d.deployment = l.deployment
    where l.stage < d.pp - 1
    group by l.model, l.deployment, l.stage
),

producers as (
    select
        s.model,
        s.stack,
        s.stream,
        s.kind,
        p.uid,
        n.template
    from streams as s
    cross join unnest(s.producers) as p (uid)
    inner join nodes as n on n.model = s.model and n.uid = p.uid
),

-- the residual carried out of the boundary's layer
carried as (
    select
        b.model,
        b.deployment,
        b.stage,
        p.stream,
        l.layer,
        p.uid as producer
    from boundaries as b
    inner join layers as l on l.model = b.model and l.deployment = b.deployment and l.position = b.position
    inner join producers as p
        on p.model = l.model and p.stack = l.stack and p.template = l.template and p.kind = 'carried'
),

-- values of internal / append streams produced at or before the boundary and read after it
-- (a reader outside the stacks runs after them)
read_values as (
    select
        r.model,
        r.stream,
        r.stack as reader_stack,
        r.layer as reader_layer,
        e.layer as element_layer
    from stream_reads as r
    cross join unnest(r.element_layers) as e (layer)
),

crossing as (
    select distinct
        b.model,
        b.deployment,
        b.stage,
        v.stream,
        v.element_layer as layer,
        p.uid as producer
    from boundaries as b
    inner join read_values as v on v.model = b.model
    inner join streams as s on s.model = v.model and s.stream = v.stream and s.kind <> 'carried'
    inner join layers as el
        on el.model = b.model and el.deployment = b.deployment and el.stack = s.stack and el.layer = v.element_layer
    left join layers as rl
        on rl.model = b.model and rl.deployment = b.deployment and rl.stack = v.reader_stack
        and rl.layer = v.reader_layer
    inner join producers as p
        on p.model = s.model and p.stack = s.stack and p.stream = s.stream and p.template = el.template
    where el.position <= b.position and (rl.position is null or rl.position > b.position)
),

sent as (
    select model, deployment, stage, stream, layer, producer from carried
    union all
    select model, deployment, stage, stream, layer, producer from crossing
),

sent_producers as (
    select distinct
        model,
        producer as uid
    from sent
),

-- a value's elements: its producer's output shape, sizes times runtime symbols (an axis of
-- B·s counts both)
value_terms as (
    select
        sh.model,
        sh.phase,
        sh.uid,
        coalesce(product(sh.size) filter (where sh.symbol is null), 1) as coef,
        sum(array_length(list_filter(string_split(coalesce(sh.symbol, ''), '*'), lambda x: x = 'B'))) as e_B,
        sum(array_length(list_filter(string_split(coalesce(sh.symbol, ''), '*'), lambda x: x = 's'))) as e_s,
        sum(array_length(list_filter(string_split(coalesce(sh.symbol, ''), '*'), lambda x: x = 'c'))) as e_c
    from base_shapes as sh
    inner join sent_producers as p on p.model = sh.model and p.uid = sh.uid
    group by sh.model, sh.phase, sh.uid
),

-- one device sends its share: the value divided by the groups splitting the producer's output
producer_divisors as (
    select
        l.model,
        l.phase,
        l.uid,
        g.deployment,
        product(case when l.parts is null then g.degree else l.parts / ceil(l.parts / g.degree) end) as divisor
    from (
        select b.model, b.phase, b.uid, b."group", max(b.parts) as parts
        from base_layouts as b
        inner join sent_producers as p on p.model = b.model and p.uid = b.uid
        where b.tensor = 'out' and b.placement = 'S'
        group by b.model, b.phase, b.uid, b."group"
    ) as l
    inner join groups as g on g."group" = l."group"
    group by l.model, l.phase, l.uid, g.deployment
),

-- the boundary between stage k and k + 1 crosses nodes when the two stages' GPUs (stage_gpus
-- apart) sit on different nodes
priced as (
    select
        x.model,
        x.deployment,
        sh.phase,
        'pipeline/' || x.stage || '-' || (x.stage + 1) || '/' || x.stream || '@' || x.layer as uid,
        'p2p' as op,
        'pipeline' as role,
        sh.e_B::tinyint as e_B,
        sh.e_s::tinyint as e_s,
        sh.e_c::tinyint as e_c,
        'none' as factor,
        0::bigint as factor_arg,
        sh.coef / coalesce(pd.divisor, 1) as coef,
        case
            when m.stage_gpus >= m.gpus_per_node then 1.0::double
            when floor((x.stage + 1) * m.stage_gpus / m.gpus_per_node) <> floor(x.stage * m.stage_gpus / m.gpus_per_node)
                then 1.0::double
            else 0.0
        end as scaleout_share
    from sent as x
    inner join value_terms as sh on sh.model = x.model and sh.uid = x.producer
    inner join mesh as m on m.deployment = x.deployment
    left join producer_divisors as pd
        on pd.model = x.model and pd.phase = sh.phase and pd.uid = x.producer and pd.deployment = x.deployment
)

select *
from priced
