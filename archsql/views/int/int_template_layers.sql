-- Layers of every block template of every stack: how many layers of the stack's schedule use it
-- and the first of them.
select
    model,
    stack,
    template,
    count(*) as layers,
    min(layer) as first_layer
from base_layer_schedule
group by model, stack, template
