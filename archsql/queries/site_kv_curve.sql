-- Cache bytes per request (bf16) against context at every stored decode workload, one line per model that keeps a cache.
select distinct
    r.model,
    r.context,
    r.bytes_per_request
from kv_per_request as r
where r.dtype = 'bf16' and r.phase = 'decode' and r.bytes_per_request > 0
order by r.model, r.context
