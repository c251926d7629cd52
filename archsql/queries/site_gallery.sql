-- Gallery: every model side by side: size, activity, layers, attention family and cache bytes per token by dtype.
select
    s.model,
    s.params,
    s.active_params,
    s.layers,
    p.attention_type as attention_family,
    p.state_representation,
    p.attention_pattern,
    bf16.bytes_per_token as kv_bytes_per_token_bf16,
    fp8.bytes_per_token as kv_bytes_per_token_fp8,
    fp4.bytes_per_token as kv_bytes_per_token_fp4,
    bf16.state_bytes_per_request as state_bytes_per_request_bf16
from model_summary as s
left join architecture_profile as p on p.model = s.model
left join kv_per_token as bf16 on bf16.model = s.model and bf16.dtype = 'bf16'
left join kv_per_token as fp8 on fp8.model = s.model and fp8.dtype = 'fp8'
left join kv_per_token as fp4 on fp4.model = s.model and fp4.dtype = 'fp4'
order by s.params, s.model
