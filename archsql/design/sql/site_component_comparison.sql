-- The component comparison of the design store (archsql compare), as compared: the rows of the view component_comparison when the comparison ran, kept in design_comparison.
select
    position,
    slot,
    component,
    origin,
    origin_template,
    role,
    model,
    d_model,
    batch,
    dtype,
    gpu,
    context,
    params_per_layer,
    weight_bytes_per_layer,
    cache_growth,
    cache_bytes_per_token,
    state_bytes_per_request,
    prefill_flops,
    prefill_time_s,
    prefill_bound,
    decode_time_s,
    cache_bytes_per_request
from design_comparison
order by position, context
