-- FLOPs of one step per model, workload and role: the role's FLOP terms evaluated at the workload.
select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    role,
    sum(value) as flops
from int_workload_terms
where quantity = 'flops'
group by all
