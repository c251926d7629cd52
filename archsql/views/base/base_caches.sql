-- Declared caches: what decode keeps across steps, per node instance and request, with the
-- storage rule of each (kv | act | a fixed dtype; null: the default kv).
select
    model,
    uid,
    cache,
    kind,
    growth,
    elements,
    "window",
    ratio,
    coalesce(dtype, 'kv') as dtype,  -- a row without a rule has the default one
    scale_dtype,
    scale_block
from caches
