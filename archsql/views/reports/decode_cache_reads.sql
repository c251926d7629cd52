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

-- each read in the bytes of the cache it reads (int_cache_read_rules), the row's dtype
-- standing for the kv (and act) dtype
reads_per_workload as (
    select
        r.model,
        r.workload,
        d.dtype,
        sum(r.value) as elements,
        sum(r.value * cache_element_bytes(r.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, r.scale_block)) as bytes
    from reads as r
    cross join dtypes as d
    left join dtypes as f on f.dtype = r.storage_rule
    left join dtypes as sc on sc.dtype = r.scale_dtype
    group by r.model, r.workload, d.dtype
),

decode_steps as (
    select
        m.model,
        w.workload,
        w.batch,
        w.context,
        d.dtype,
        coalesce(r.elements, 0) as elements_read,
        coalesce(r.bytes, 0) as bytes_read,
        coalesce(r.bytes, 0) / w.batch as bytes_read_per_request
    from models as m
    cross join workloads as w
    cross join dtypes as d
    left join reads_per_workload as r on r.model = m.model and r.workload = w.workload and r.dtype = d.dtype
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
