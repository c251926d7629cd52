-- What each reading layer (or model-graph node) reads of an internal or append stream.
select
    model,
    stream,
    stack,
    layer,
    template,
    elements,
    element_layers
from stream_reads
