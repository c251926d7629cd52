-- How each tensor is split across parallel groups (one row per sharded axis or pending-sum group).
select
    model,
    phase,
    uid,
    tensor,
    axis,
    placement,
    "group",
    parts,
    segments
from layouts
