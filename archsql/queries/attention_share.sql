-- Share of each step's FLOPs spent in attention, per model and workload.
select
    f.model,
    f.workload,
    f.phase,
    f.context,
    coalesce(a.flops, 0) as attention_flops,
    f.flops,
    coalesce(a.flops, 0) / nullif(f.flops, 0) as attention_share
from flops as f
left join flops_by_role as a on a.model = f.model and a.workload = f.workload and a.role = 'attention'
order by f.model, f.workload
