-- Declared caches: what decode keeps across steps, per node instance and request.
select
    model,
    uid,
    cache,
    kind,
    growth,
    elements,
    "window",
    ratio
from caches
