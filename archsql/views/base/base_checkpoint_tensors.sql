-- Tensors of the checkpoints in the store, as their headers describe them.
select
    checkpoint,
    format,
    file,
    name,
    dtype,
    shape,
    offset_begin,
    offset_end
from checkpoint_tensors
