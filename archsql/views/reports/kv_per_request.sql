-- Cache size of every model after every workload's step, in every dtype: each entry's growth law at the context.
with

models as (
    select model
    from base_models
),

workloads as (
    select * from base_workloads
),

dtypes as (
    select * from base_dtypes
),

quantities as (
    select *
    from int_workload_terms
    where quantity = 'cache_elements'
),

-- each cache in the dtype its storage rule gives, the row's dtype standing for the kv (and
-- act) dtype
elements_per_workload as (
    select
        q.model,
        q.workload,
        d.dtype,
        sum(q.value) as elements,
        sum(q.value * cache_element_bytes(q.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, q.scale_block)) as bytes
    from quantities as q
    cross join dtypes as d
    left join dtypes as f on f.dtype = q.storage_rule
    left join dtypes as sc on sc.dtype = q.scale_dtype
    group by q.model, q.workload, d.dtype
),

joined as (
    select
        m.model,
        w.workload,
        w.phase,
        w.batch,
        w.context,
        d.dtype,
        coalesce(e.elements, 0) as elements,
        coalesce(e.bytes, 0) as bytes,
        coalesce(e.bytes, 0) / w.batch as bytes_per_request
    from models as m
    cross join workloads as w
    cross join dtypes as d
    left join elements_per_workload as e on e.model = m.model and e.workload = w.workload and e.dtype = d.dtype
)

select
    model,
    workload,
    phase,
    batch,
    context,
    dtype,
    elements,
    bytes,
    bytes_per_request
from joined
