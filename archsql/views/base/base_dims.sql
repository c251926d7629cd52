-- Every bound model dim, one row per (model, dim).
select
    model,
    dim,
    value,
    binding,
    kind
from dims
