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

per_group as (
    select
        model,
        template,
        kind,
        growth,
        sum(elements_per_token) as elements_per_token,
        sum(state_elements)::bigint as state_elements_per_request
    from entries
    group by all
),

joined as (
    select
        g.*,
        d.dtype,
        l.layers,
        g.elements_per_token * d.bytes as bytes_per_token,
        g.state_elements_per_request * d.bytes as state_bytes_per_request
    from per_group as g
    cross join dtypes as d
    left join layers_per_template as l using (model, template)
)

select
    model,
    dtype,
    template,
    kind,
    growth,
    layers,
    elements_per_token,
    bytes_per_token,
    state_elements_per_request,
    state_bytes_per_request
from joined
