-- What decode keeps across steps, per cache entry: kind, growth law, window or ratio, elements and storage dtype.
select
    c.model,
    c.uid,
    c.cache,
    c.kind,
    c.growth,
    c.window,
    c.ratio,
    c.elements,
    c.dtype,
    c.scale_dtype
from base_caches as c
order by c.model, c.uid, c.kind
