-- The kernel each node's time belongs to, per phase: a node whose op launches a kernel of a
-- measured op kind (the kernel corpus's op kinds) anchors a kernel of its own; the nodes
-- between an attention score and its attention apply (softcap, softmax with sinks, the
-- apply) belong to the score's kernel, as a flash-attention kernel runs them; every other
-- node is a kernel of its own without an op kind (element-wise, views, routing, scans, ...).
-- An attention's mask is read from its FLOP terms: the causal triangle (an s² term) or a
-- window factor make it causal ('attention', window from the factor), neither makes it
-- bidirectional ('encoder_attention'), a chunked mask has no corpus op kind.
with recursive

nodes as (
    select
        model,
        uid,
        op,
        decode_op,
        role,
        in_base_model
    from base_nodes
),

node_phases as (
    select distinct
        model,
        phase,
        uid
    from base_shapes
    union
    select
        model,
        phase,
        uid
    from base_collectives
),

phase_nodes as (
    select
        p.model,
        p.phase,
        p.uid,
        case when p.phase = 'decode' then coalesce(n.decode_op, n.op) else n.op end as op,
        n.role,
        -- the component instance: the uid up to its last '.'
        regexp_replace(p.uid, '\.[^./]*$', '') as instance
    from node_phases as p
    inner join nodes as n on n.model = p.model and n.uid = p.uid
    where n.in_base_model
),

-- each node with its op's kernel traits (Primitive.kernel_kind, attention_stage)
staged_nodes as (
    select
        p.*,
        o.op_kind,
        o.attention_stage
    from phase_nodes as p
    left join base_op_kernels as o on o.op = p.op
),


edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid
    from base_edges
    where src_uid is not null
),

scores as (
    select
        model,
        phase,
        uid,
        instance
    from staged_nodes
    where attention_stage = 'score' and op_kind = 'attention'
),

-- the edges inside each score's component instance
instance_edges as (
    select
        e.model,
        e.phase,
        s.uid as score_uid,
        e.src_uid,
        e.dst_uid,
        d.attention_stage as dst_stage
    from edges as e
    inner join staged_nodes as d on d.model = e.model and d.phase = e.phase and d.uid = e.dst_uid
    inner join phase_nodes as r on r.model = e.model and r.phase = e.phase and r.uid = e.src_uid
    inner join scores as s on s.model = d.model and s.phase = d.phase and s.instance = d.instance
    where r.instance = d.instance
),

-- forward from a score along those edges, stopping at the apply
after_score (model, phase, score_uid, uid, stage) as (
    select
        model,
        phase,
        uid as score_uid,
        uid,
        'score' as stage
    from scores
    union
    select
        a.model,
        a.phase,
        a.score_uid,
        e.dst_uid as uid,
        e.dst_stage as stage
    from after_score as a
    inner join instance_edges as e
        on e.model = a.model and e.phase = a.phase and e.score_uid = a.score_uid and e.src_uid = a.uid
    where a.stage is distinct from 'apply'
),

-- backward from every apply the walk reached, through nodes it reached, to the score
before_apply (model, phase, score_uid, uid) as (
    select
        model,
        phase,
        score_uid,
        uid
    from after_score
    where stage = 'apply'
    union
    select
        b.model,
        b.phase,
        b.score_uid,
        e.src_uid as uid
    from before_apply as b
    inner join instance_edges as e
        on e.model = b.model and e.phase = b.phase and e.score_uid = b.score_uid and e.dst_uid = b.uid
    inner join after_score as a
        on a.model = e.model and a.phase = e.phase and a.score_uid = e.score_uid and a.uid = e.src_uid
    where b.uid <> b.score_uid
),

score_masks as (
    select
        t.model,
        t.phase,
        t.uid,
        bool_or(t.e_s = 2 or t.factor in ('window_pairs', 'min_c')) as causal,
        bool_or(t.factor in ('chunk_pairs', 'chunk_len')) as chunked,
        max(t.factor_arg) filter (where t.factor in ('window_pairs', 'min_c') and t.factor_arg > 0) as window_size
    from base_terms as t
    inner join scores as s on s.model = t.model and s.phase = t.phase and s.uid = t.uid
    where t.quantity = 'flops'
    group by t.model, t.phase, t.uid
),

attention_members as (
    select
        model,
        phase,
        uid,
        min(score_uid) as kernel_uid
    from before_apply
    where uid <> score_uid
    group by model, phase, uid
),

kinds as (
    select
        n.model,
        n.phase,
        n.uid,
        case
            when n.op_kind is distinct from 'attention' then n.op_kind
            when sm.chunked then null
            when sm.causal then 'attention'
            else 'encoder_attention'
        end as op_kind,
        sm.window_size
    from staged_nodes as n
    left join score_masks as sm on sm.model = n.model and sm.phase = n.phase and sm.uid = n.uid
),

kernels as (
    select
        n.model,
        n.phase,
        n.uid,
        n.op,
        n.role,
        n.instance,
        coalesce(m.kernel_uid, n.uid) as kernel_uid,
        coalesce(ka.op_kind, k.op_kind) as op_kind,
        k.window_size
    from phase_nodes as n
    left join attention_members as m on m.model = n.model and m.phase = n.phase and m.uid = n.uid
    left join kinds as ka on ka.model = m.model and ka.phase = m.phase and ka.uid = m.kernel_uid
    left join kinds as k on k.model = n.model and k.phase = n.phase and k.uid = n.uid and m.kernel_uid is null
)

select
    model,
    phase,
    uid,
    op,
    role,
    instance,
    kernel_uid,
    uid = kernel_uid as anchor,
    op_kind,
    window_size
from kernels
