-- FLOPs of one step per model, workload and role: the role's FLOP terms evaluated at the workload.
with

workloads as (
    select
        workload,
        phase,
        batch,
        new_tokens,
        context
    from base_workloads
),

terms as (
    select
        model,
        phase,
        role,
        e_B,
        e_s,
        e_c,
        coef
    from int_flop_terms_by_role
),

term_values as (
    select
        t.model,
        w.workload,
        w.phase,
        w.batch,
        w.new_tokens,
        w.context,
        t.role,
        t.coef
        * power(w.batch, t.e_B)
        * power(w.new_tokens, t.e_s)
        * power(w.context, t.e_c) as flops
    from terms as t
    inner join workloads as w on w.phase = t.phase
),

summed as (
    select
        model,
        workload,
        phase,
        batch,
        new_tokens,
        context,
        role,
        sum(flops) as flops
    from term_values
    group by model, workload, phase, batch, new_tokens, context, role
)

select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    role,
    flops
from summed
