-- Which model and storage profile each checkpoint is reconciled against.
select
    checkpoint,
    model,
    profile
from checkpoints
