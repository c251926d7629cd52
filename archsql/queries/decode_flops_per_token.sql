-- Decode FLOPs per generated token at every stored decode workload, largest models first.
select
    f.model,
    f.workload,
    f.batch,
    f.context,
    f.flops_per_new_token,
    f.flops_per_new_token / (2.0 * s.active_params) as flops_per_active_param_x2
from flops as f
inner join model_summary as s on s.model = f.model
where f.phase = 'decode'
order by s.params desc, f.workload
