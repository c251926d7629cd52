-- Logical elements of every weight tensor of one node instance.
select
    model,
    uid,
    tensor,
    name,
    shape,
    elements,
    streamed
from weights
