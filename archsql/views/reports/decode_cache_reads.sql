-- Cache bytes one decode step reads, per model, decode workload and dtype: the whole cache at the step's context.
with

cache_sizes as (
    select
        model,
        workload,
        phase,
        batch,
        context,
        dtype,
        elements,
        bytes
    from kv_per_request
),

decode_steps as (
    select
        model,
        workload,
        batch,
        context,
        dtype,
        elements as elements_read,
        bytes as bytes_read,
        bytes / batch as bytes_read_per_request
    from cache_sizes
    where phase = 'decode'
)

select
    model,
    workload,
    batch,
    context,
    dtype,
    elements_read,
    bytes_read,
    bytes_read_per_request
from decode_steps
