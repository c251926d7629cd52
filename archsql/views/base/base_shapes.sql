-- One row per output axis of every node: its dim expression and bound size (table shapes).
select
    model,
    phase,
    uid,
    axis,
    dim,
    size,
    symbol
from shapes
