-- Every stream of every stack: the carried residual, internal and append streams.
select
    model,
    stack,
    stream,
    kind,
    read,
    archive_at,
    source,
    layers,
    producers,
    readers,
    src
from streams
