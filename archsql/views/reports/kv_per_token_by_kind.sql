-- Per-token cache growth and fixed state of every model by layer group and cache kind, in every dtype.
with

dtypes as (
    select * from base_dtypes
),

entries as (
    select *
    from int_cache_entries
    where phase = 'decode'
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

-- each entry under its storage rule, the row's dtype standing for the kv (and act) dtype
per_group as (
    select
        e.model,
        d.dtype,
        e.template,
        e.kind,
        e.growth,
        cache_storage_dtype(e.storage_rule, d.dtype, d.dtype, e.scale_dtype, e.scale_block) as storage_dtype,
        sum(e.elements_per_token) as elements_per_token,
        sum(e.elements_per_token * cache_element_bytes(e.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, e.scale_block)) as bytes_per_token,
        sum(e.state_elements)::bigint as state_elements_per_request,
        sum(e.state_elements * cache_element_bytes(e.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, e.scale_block)) as state_bytes_per_request
    from entries as e
    cross join dtypes as d
    left join dtypes as f on f.dtype = e.storage_rule
    left join dtypes as sc on sc.dtype = e.scale_dtype
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
    dtype,
    template,
    kind,
    growth,
    storage_dtype,
    layers,
    elements_per_token,
    bytes_per_token,
    state_elements_per_request,
    state_bytes_per_request
from joined
