-- FLOPs of one step of every model for every workload, from the pre-summed FLOP terms.
with

models as (
    select model
    from base_models
),

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
        e_B,
        e_s,
        e_c,
        coef
    from int_flop_terms_by_model
),

model_workloads as (
    select
        m.model,
        w.workload,
        w.phase,
        w.batch,
        w.new_tokens,
        w.context
    from models as m
    cross join workloads as w
),

term_values as (
    select
        mw.model,
        mw.workload,
        t.coef
        * power(mw.batch, t.e_B)
        * power(mw.new_tokens, t.e_s)
        * power(mw.context, t.e_c) as flops
    from model_workloads as mw
    inner join terms as t on t.model = mw.model and t.phase = mw.phase
),

flops_per_workload as (
    select
        model,
        workload,
        sum(flops) as flops
    from term_values
    group by model, workload
),

joined as (
    select
        mw.model,
        mw.workload,
        mw.phase,
        mw.batch,
        mw.new_tokens,
        mw.context,
        coalesce(f.flops, 0) as flops,
        coalesce(f.flops, 0) / nullif(mw.batch * mw.new_tokens, 0) as flops_per_new_token
    from model_workloads as mw
    left join flops_per_workload as f on f.model = mw.model and f.workload = mw.workload
)

select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    flops,
    flops_per_new_token
from joined
