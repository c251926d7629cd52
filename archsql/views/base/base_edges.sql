-- Dataflow edges: which node feeds which input port of which node (table edges).
select
    model,
    phase,
    src_uid,
    dst_uid,
    port,
    stream
from edges
