-- FLOPs of one step per model, workload and role: the role's FLOP terms evaluated at the workload.
with

quantities as (
    select
        model,
        workload,
        phase,
        batch,
        new_tokens,
        context,
        role,
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
        role,
        sum(value) as flops
    from quantities
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
