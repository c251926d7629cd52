-- FLOPs of one step per model, workload and layer group (block template).
select
    model,
    workload,
    phase,
    batch,
    new_tokens,
    context,
    template,
    sum(value) as flops
from int_workload_terms
where quantity = 'flops'
group by all
