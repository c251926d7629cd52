-- Cache bytes per request (bf16) against context at every stored decode workload, one line per model.
select distinct
    r.model,
    r.context,
    r.bytes_per_request
from kv_per_request as r
where r.dtype = 'bf16' and r.phase = 'decode'
order by r.model, r.context
