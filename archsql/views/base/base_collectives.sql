-- Inferred collectives: which node's input they prepare, what kind, over which group.
select
    model,
    phase,
    uid,
    consumer_uid,
    port,
    kind,
    "group"
from collectives
