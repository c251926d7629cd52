-- Activation memory of one device: the bytes held while each op runs (one layer of its
-- template), per deployment and workload, and the peak over the step.
with

liveness as (
    select
        model,
        phase,
        uid,
        live_uid
    from base_liveness
),

nodes as (
    select distinct
        model,
        uid,
        stack,
        template
    from base_nodes
),

template_layers as (
    select
        model,
        stack,
        template,
        count(*) as layers
    from base_layer_schedule
    group by model, stack, template
),

layers as (
    select
        n.model,
        n.uid,
        coalesce(t.layers, 1) as layers
    from nodes as n
    left join template_layers as t on t.model = n.model and t.stack = n.stack and t.template = n.template
),

-- which ops can hold the peak, decided on the terms (no workload): every live tensor is a sum
-- of positive monomials in B, s, c (and image patches), so an op whose held bytes are, monomial
-- by monomial, at most another op's never holds more at any workload.  The leaders (the
-- largest coefficient of each monomial) prune the ops they cover; an op kept is evaluated.
output_terms as (
    select
        o.model,
        o.deployment,
        o.phase,
        o.uid,
        o.e_B,
        o.e_s,
        o.e_c,
        o.factor,
        o.factor_arg,
        o.output_bytes / l.layers as coef
    from int_device_op_terms as o
    inner join layers as l on l.model = o.model and l.uid = o.uid
    where o.output_bytes <> 0
),

held_terms as (
    select
        l.model,
        o.deployment,
        l.phase,
        l.uid,
        o.e_B,
        o.e_s,
        o.e_c,
        o.factor,
        o.factor_arg,
        sum(o.coef) as coef
    from liveness as l
    inner join output_terms as o on o.model = l.model and o.phase = l.phase and o.uid = l.live_uid
    group by l.model, o.deployment, l.phase, l.uid, o.e_B, o.e_s, o.e_c, o.factor, o.factor_arg
),

held_ops as (
    select
        model,
        deployment,
        phase,
        uid,
        count(*) as monomials
    from held_terms
    group by model, deployment, phase, uid
),

leaders as (
    select distinct
        model,
        deployment,
        phase,
        first(uid order by coef desc, uid) as uid
    from held_terms
    group by model, deployment, phase, e_B, e_s, e_c, factor, factor_arg
),

-- each leader with its monomial count (joined here, on the few leaders: joining held_ops to
-- covers twice let the planner pair every two ops of a deployment first, 95 M rows, 7 s of CPU)
leader_ops as (
    select
        ld.model,
        ld.deployment,
        ld.phase,
        ld.uid,
        a.monomials
    from leaders as ld
    inner join held_ops as a
        on a.model = ld.model and a.deployment = ld.deployment and a.phase = ld.phase and a.uid = ld.uid
),

-- a leader covers an op when its coefficient is at least the op's on each of the op's monomials
-- (count(*): the op's monomials — the left join keeps one row per monomial of the op)
covers as (
    select
        h.model,
        h.deployment,
        h.phase,
        h.uid,
        ld.uid as leader,
        bool_and(coalesce(c.coef, 0) >= h.coef) as covers,
        bool_and(coalesce(c.coef, 0) = h.coef) as ties,
        count(*) as monomials,
        any_value(ld.monomials) as leader_monomials
    from held_terms as h
    inner join leader_ops as ld
        on ld.model = h.model and ld.deployment = h.deployment and ld.phase = h.phase and ld.uid <> h.uid
    left join held_terms as c
        on c.model = ld.model and c.deployment = ld.deployment and c.phase = ld.phase and c.uid = ld.uid
        and c.e_B = h.e_B and c.e_s = h.e_s and c.e_c = h.e_c and c.factor = h.factor
        and c.factor_arg = h.factor_arg
    group by h.model, h.deployment, h.phase, h.uid, ld.uid
),

-- covered strictly (larger somewhere, or more monomials), or identical and after the leader
pruned as (
    select distinct
        model,
        deployment,
        phase,
        uid
    from covers
    where
        covers and (
            not ties or leader_monomials > monomials or (leader_monomials = monomials and leader < uid)
        )
),

candidates as (
    select
        h.model,
        h.deployment,
        h.phase,
        h.uid
    from held_ops as h
    anti join pruned as p
        on p.model = h.model and p.deployment = h.deployment and p.phase = h.phase and p.uid = h.uid
),

-- the per-device output of every op at every workload, all layers and copies
outputs as (
    select
        model,
        deployment,
        workload,
        phase,
        uid,
        output_bytes
    from int_device_op_values
    where output_bytes > 0
),

-- one layer's worth: an op's values cover every layer of its template
per_layer as (
    select
        o.model,
        o.deployment,
        o.workload,
        o.phase,
        o.uid,
        o.output_bytes / l.layers as bytes
    from outputs as o
    inner join layers as l on l.model = o.model and l.uid = o.uid
),

-- the tensors held while each candidate op runs
per_op as (
    select
        c.model,
        c.deployment,
        p.workload,
        c.phase,
        c.uid,
        sum(p.bytes) as bytes
    from candidates as c
    inner join liveness as l on l.model = c.model and l.phase = c.phase and l.uid = c.uid
    inner join per_layer as p
        on p.model = c.model and p.deployment = c.deployment and p.phase = c.phase and p.uid = l.live_uid
    group by c.model, c.deployment, p.workload, c.phase, c.uid
),

peaks as (
    select
        model,
        deployment,
        workload,
        phase,
        first(uid order by bytes desc, uid) as peak_op,  -- ties: the first uid
        max(bytes) as bytes
    from per_op
    group by model, deployment, workload, phase
)

select
    model,
    deployment,
    workload,
    phase,
    peak_op,
    bytes
from peaks
