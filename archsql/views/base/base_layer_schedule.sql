-- Which block template each layer of each repeated stack uses.
select
    model,
    stack,
    layer,
    template
from layer_schedule
