-- Repeated stacks of layers: decoder layers, or multi-token-prediction (mtp) layers.
select
    model,
    stack,
    role,
    layers,
    first_layer,
    path
from stacks
