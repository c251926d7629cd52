-- Copies of each node in the model, and how many of them one token passes through.
select
    model,
    uid,
    count,
    active_count
from instances
