-- Per-token cache growth and fixed state of every model, in every dtype (the kv dtype: each
-- cache in the dtype its storage rule gives, base_caches.dtype).
with

models as (
    select model
    from base_models
),

dtypes as (
    select * from base_dtypes
),

entries as (
    select *
    from int_cache_entries
    where phase = 'decode'
),

template_layers as (
    select * from int_template_layers
),

-- bytes per element of each entry under its storage rule, the row's dtype standing for the
-- deployment's kv dtype (and act dtype: these views know no deployment)
elements_per_model as (
    select
        e.model,
        d.dtype,
        sum(e.elements_per_token) as elements_per_token,
        sum(e.elements_per_token * cache_element_bytes(e.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, e.scale_block)) as bytes_per_token,
        sum(e.state_elements)::bigint as state_elements_per_request,
        sum(e.state_elements * cache_element_bytes(e.storage_rule, d.bytes, d.bytes, f.bytes, sc.bytes, e.scale_block)) as state_bytes_per_request
    from entries as e
    cross join dtypes as d
    left join dtypes as f on f.dtype = e.storage_rule
    left join dtypes as sc on sc.dtype = e.scale_dtype
    group by e.model, d.dtype
),

cached_templates as (
    select distinct
        model,
        stack,
        template
    from entries
),

cached_layers as (
    select
        t.model,
        sum(t.layers)::bigint as cache_layers
    from template_layers as t
    inner join cached_templates as c
        on c.model = t.model and c.stack = t.stack and c.template = t.template
    group by t.model
),

joined as (
    select
        m.model,
        d.dtype,
        coalesce(e.elements_per_token, 0) as elements_per_token,
        coalesce(e.bytes_per_token, 0) as bytes_per_token,
        coalesce(e.state_elements_per_request, 0) as state_elements_per_request,
        coalesce(e.state_bytes_per_request, 0) as state_bytes_per_request,
        coalesce(l.cache_layers, 0) as cache_layers
    from models as m
    cross join dtypes as d
    left join elements_per_model as e on e.model = m.model and e.dtype = d.dtype
    left join cached_layers as l on l.model = m.model
)

select
    model,
    dtype,
    elements_per_token,
    bytes_per_token,
    state_elements_per_request,
    state_bytes_per_request,
    cache_layers
from joined
