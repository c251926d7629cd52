-- Every term of every model evaluated at every workload of its phase — the whole-model terms
-- (deployment null) and the per-device terms of every op in every deployment.  The one place
-- where term rows meet workloads; reports sum the values at the grain they need.
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
        quantity,
        role,
        template,
        kind,
        growth,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from int_model_terms
),

device_terms as (
    select
        model,
        deployment,
        phase,
        uid,
        op,
        quantity,
        role,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from int_device_terms
),

all_terms as (
    select
        model,
        null::varchar as deployment,
        phase,
        null::varchar as uid,
        null::varchar as op,
        quantity,
        role,
        template,
        kind,
        growth,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from terms
    union all
    select
        model,
        deployment,
        phase,
        uid,
        op,
        quantity,
        role,
        null::varchar as template,
        null::varchar as kind,
        null::varchar as growth,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from device_terms
),

term_values as (
    select
        t.model,
        t.deployment,
        w.workload,
        w.phase,
        w.batch,
        w.new_tokens,
        w.context,
        t.uid,
        t.op,
        t.quantity,
        t.role,
        t.template,
        t.kind,
        t.growth,
        t.e_B,
        t.e_s,
        t.e_c,
        t.factor,
        t.factor_arg,
        t.coef
        * power(w.batch, t.e_B)
        * power(w.new_tokens, t.e_s)
        * power(w.context, t.e_c)
        * term_factor(t.factor, t.factor_arg, w.new_tokens, w.context)::double as value
    from all_terms as t
    inner join workloads as w on w.phase = t.phase
)

select
    model,
    deployment,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    uid,
    op,
    quantity,
    role,
    template,
    kind,
    growth,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    value
from term_values
