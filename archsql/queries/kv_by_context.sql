-- Cache bytes per request (bf16) of every model at every decode workload's context, against a cache that never stops growing.
select
    r.model,
    r.workload,
    r.context,
    r.bytes_per_request,
    t.bytes_per_token * r.context + t.state_bytes_per_request as bytes_if_unbounded,
    r.bytes_per_request / nullif(t.bytes_per_token * r.context + t.state_bytes_per_request, 0) as share_of_unbounded
from kv_per_request as r
inner join kv_per_token as t on t.model = r.model and t.dtype = r.dtype
where r.dtype = 'bf16' and r.phase = 'decode'
order by r.model, r.context, r.workload
