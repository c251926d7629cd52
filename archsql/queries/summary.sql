-- Cross-model summary: size, activity, shape and KV cache per token (bf16) of every model.
select
    s.model,
    s.params,
    s.active_params,
    s.layers,
    s.hidden_size,
    s.max_context,
    kv.bytes_per_token as kv_bytes_per_token_bf16
from model_summary as s
left join kv_per_token as kv on kv.model = s.model and kv.dtype = 'bf16'
order by s.params
