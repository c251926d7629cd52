-- Cache bytes one decode step reads, per model, decode workload and dtype: the cache reads of every
-- node of the step (each op's cache_read_elements terms), evaluated at the workload.
with

models as (
    select model
    from base_models
),

workloads as (
    select *
    from base_workloads
    where phase = 'decode'
),

dtypes as (
    select * from base_dtypes
),

reads as (
    select *
    from int_workload_terms
    where quantity = 'cache_read_elements' and phase = 'decode'
),

reads_per_workload as (
    select
        model,
        workload,
        sum(value) as elements
    from reads
    group by model, workload
),

decode_steps as (
    select
        m.model,
        w.workload,
        w.batch,
        w.context,
        d.dtype,
        coalesce(r.elements, 0) as elements_read,
        coalesce(r.elements, 0) * d.bytes as bytes_read,
        coalesce(r.elements, 0) * d.bytes / w.batch as bytes_read_per_request
    from models as m
    cross join workloads as w
    cross join dtypes as d
    left join reads_per_workload as r on r.model = m.model and r.workload = w.workload
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
