-- Cache size of every model after every workload's step by layer group (block template) and cache kind, in every dtype.
with

dtypes as (
    select * from base_dtypes
),

quantities as (
    select *
    from int_workload_terms
    where quantity = 'cache_elements'
),

-- layers of each template over all the model's stacks
layers_per_template as (
    select
        model,
        template,
        sum(layers)::bigint as layers
    from int_template_layers
    group by model, template
),

-- each cache in the dtype its storage rule gives (base_caches.dtype), the row's dtype standing
-- for the deployment's kv dtype (and act dtype: this view knows no deployment)
per_group as (
    select
        q.model,
        q.workload,
        q.template,
        q.kind,
        q.growth,
        d.dtype,
        cache_storage_dtype(q.storage_rule, d.dtype, d.dtype, q.scale_dtype, q.scale_block) as storage_dtype,
        sum(q.value) as elements,
        sum(q.value * cache_element_bytes(q.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, q.scale_block)) as bytes
    from quantities as q
    cross join dtypes as d
    left join dtypes as f on f.dtype = q.storage_rule
    left join dtypes as sc on sc.dtype = q.scale_dtype
    group by all
),

joined as (
    select
        g.*,
        l.layers
    from per_group as g
    left join layers_per_template as l using (model, template)
)

select
    model,
    workload,
    template,
    kind,
    growth,
    layers,
    dtype,
    storage_dtype,
    elements,
    bytes
from joined
