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

elements_per_workload as (
    select
        model,
        workload,
        sum(value) as elements
    from quantities
    group by model, workload
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
        coalesce(e.elements, 0) * d.bytes as bytes,
        coalesce(e.elements, 0) * d.bytes / w.batch as bytes_per_request
    from models as m
    cross join workloads as w
    cross join dtypes as d
    left join elements_per_workload as e on e.model = m.model and e.workload = w.workload
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
