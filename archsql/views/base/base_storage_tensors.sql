-- How each weight tensor is stored: one row per stored tensor template (data part, quant siblings, buffers).
select
    model,
    profile,
    uid,
    tensor,
    part,
    name,
    layers,
    scheme,
    rule,
    dtype,
    shape,
    packing,
    axis_map
from storage_tensors
