-- Instances of every edge of every model's op graph (int_fusion_graph: collectives' edges too): how many times a producer's output is
-- read by the consumer in one forward.  An edge inside a layer runs once per instance; an
-- edge of a stack's carried stream (base_edges.stream) runs once per pair of consecutive
-- layers running the producer's and the consumer's templates, once into the stack's first
-- layer and once out of its last.  An edge of an archived stream (read all / concat: a layer
-- reading the history of several layers) has no count here (null).
with

edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        port,
        stream
    from int_fusion_graph
),

nodes as (
    select
        model,
        uid,
        stack,
        template
    from base_nodes
),

instances as (
    select
        model,
        uid,
        count
    from base_instances
),

schedule as (
    select
        model,
        stack,
        layer,
        template,
        lead(template) over (partition by model, stack order by layer) as next_template,
        layer = min(layer) over (partition by model, stack) as first_layer,
        layer = max(layer) over (partition by model, stack) as last_layer
    from base_layer_schedule
),

layer_pairs as (
    select
        model,
        stack,
        template,
        next_template,
        count(*) as pairs
    from schedule
    where next_template is not null
    group by model, stack, template, next_template
)

select
    e.model,
    e.phase,
    e.src_uid,
    e.dst_uid,
    e.port,
    case
        when e.stream is null then least(si.count, di.count)
        when st.kind is distinct from 'carried' then null
        when a.stack is not null and a.stack = b.stack then coalesce(p.pairs, 0)
        when b.stack is not null
            then (select count(*) from schedule as f where f.model = e.model and f.stack = b.stack and f.first_layer and f.template = b.template)
        when a.stack is not null
            then (select count(*) from schedule as l where l.model = e.model and l.stack = a.stack and l.last_layer and l.template = a.template)
        else 1
    end as instances
from edges as e
inner join nodes as a on a.model = e.model and a.uid = e.src_uid
inner join nodes as b on b.model = e.model and b.uid = e.dst_uid
inner join instances as si on si.model = e.model and si.uid = e.src_uid
inner join instances as di on di.model = e.model and di.uid = e.dst_uid
left join layer_pairs as p
    on p.model = e.model and p.stack = a.stack and p.template = a.template and p.next_template = b.template
left join (select distinct model, stream, kind from base_streams where kind = 'carried') as st
    on st.model = e.model and st.stream = e.stream
