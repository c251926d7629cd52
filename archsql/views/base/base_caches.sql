-- Declared caches: what decode keeps across steps, per instance.
select
    model,
    uid,
    cache,
    kind,
    growth,
    elements_per_token
from caches
