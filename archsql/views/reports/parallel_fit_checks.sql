-- Layouts a model cannot run as the deployment asks, one row per model × deployment × problem.
with

deployments as (
    select
        d.deployment,
        g.tp,
        g.pp,
        g.cp,
        d.cp_kind
    from base_deployments as d
    inner join int_deployment_degrees as g on g.deployment = d.deployment
),

-- the attention scores (Primitive.attention_stage = 'score')
nodes as (
    select
        n.model,
        n.uid,
        n.op
    from base_nodes as n
    inner join base_op_kernels as o on o.op = n.op
    where n.in_base_model and o.attention_stage = 'score'
),

node_shapes as (
    select
        model,
        phase,
        uid,
        axis,
        size
    from base_shapes
),

node_edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        port
    from base_edges
),

-- heads of every attention kernel: the queries (scores axis 1, prefill) and the keys it reads
-- in decode (the cached tensor's axis 2; an MLA latent has one)
heads as (
    select
        n.model,
        n.uid,
        max(q.size) as query_heads,
        max(k.size) as kv_heads
    from nodes as n
    left join node_shapes as q on q.model = n.model and q.uid = n.uid and q.phase = 'prefill' and q.axis = 1
    left join node_edges as e on e.model = n.model and e.dst_uid = n.uid and e.phase = 'decode' and e.port = 1
    left join node_shapes as k on k.model = e.model and k.uid = e.src_uid and k.phase = 'decode' and k.axis = 2
    group by n.model, n.uid
),

ulysses as (
    select
        h.model,
        d.deployment,
        h.uid,
        h.query_heads,
        h.kv_heads,
        d.tp * d.cp as split
    from heads as h
    cross join deployments as d
    where d.cp_kind = 'ulysses' and d.cp > 1
),

layers as (
    select
        s.model,
        count(*) as layers
    from base_layer_schedule as s
    inner join base_stacks as st on st.model = s.model and st.stack = s.stack
    where st.role <> 'mtp'
    group by s.model
),

problems as (
    select
        model,
        deployment,
        'ulysses heads' as rule,
        format('{}: {} query heads do not split over tp × cp = {}', uid, query_heads, split) as problem,
        'use cp_kind ring, or tp × cp dividing the heads' as fix
    from ulysses
    where query_heads % split <> 0
    union all
    select
        model,
        deployment,
        'ulysses kv heads' as rule,
        format(
            '{}: {} cached key/value heads do not split over tp × cp = {}; they are replicated, so the '
            || 'cache per device is larger than the views count (they split it like the ring)',
            uid, kv_heads, split
        ) as problem,
        'use cp_kind ring (it splits the cached positions)' as fix
    from ulysses
    where kv_heads is not null and kv_heads % split <> 0
    union all
    select
        l.model,
        d.deployment,
        'pipeline stages' as rule,
        format('pp = {} stages for {} layers: {} stages hold no layer', d.pp, l.layers, d.pp - l.layers) as problem,
        'use at most as many stages as layers' as fix
    from layers as l
    cross join deployments as d
    where d.pp > l.layers
)

select
    model,
    deployment,
    rule,
    problem,
    fix
from problems
