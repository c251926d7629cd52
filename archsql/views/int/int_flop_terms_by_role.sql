-- FLOP terms of a whole model per role: per-instance terms times copies, summed by monomial.
with

terms as (
    select
        model,
        phase,
        uid,
        coef,
        e_B,
        e_s,
        e_c
    from base_terms
    where quantity = 'flops'
),

instances as (
    select
        model,
        uid,
        count
    from base_instances
),

roles as (
    select
        model,
        uid,
        role
    from base_nodes
),

scaled as (
    select
        t.model,
        t.phase,
        r.role,
        t.e_B,
        t.e_s,
        t.e_c,
        t.coef * i.count as coef
    from terms as t
    inner join instances as i on i.model = t.model and i.uid = t.uid
    inner join roles as r on r.model = t.model and r.uid = t.uid
),

summed as (
    select
        model,
        phase,
        role,
        e_B,
        e_s,
        e_c,
        sum(coef) as coef
    from scaled
    group by model, phase, role, e_B, e_s, e_c
)

select
    model,
    phase,
    role,
    e_B,
    e_s,
    e_c,
    coef
from summed
