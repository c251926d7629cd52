-- FLOPs of one step of every model for every workload: the flops of int_workload_terms summed.
with

models as (
    select model
    from base_models
),

workloads as (
    select *
    from base_workloads
),

quantities as (
    select
        model,
        workload,
        value
    from int_workload_terms
    where quantity = 'flops'
),

model_workloads as (
    select
        m.model,
        w.*
    from models as m
    cross join workloads as w
),

flops_per_workload as (
    select
        model,
        workload,
        sum(value) as flops
    from quantities
    group by model, workload
),

joined as (
    select
        mw.*,
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
