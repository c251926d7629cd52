-- FLOPs of one step per model, workload and layer group (block template).
with

quantities as (
    select
        model,
        workload,
        phase,
        batch,
        new_tokens,
        context,
        template,
        value
    from int_workload_terms
    where quantity = 'flops'
),

summed as (
    select
        model,
        workload,
        phase,
        batch,
        new_tokens,
        context,
        template,
        sum(value) as flops
    from quantities
    group by model, workload, phase, batch, new_tokens, context, template
)

select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    template,
    flops
from summed
