-- Per-token cache growth and fixed state of every model by layer group and cache kind, in every dtype.
with

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

entries as (
    select
        model,
        template,
        kind,
        growth,
        elements_per_token,
        state_elements
    from int_cache_entries
    where phase = 'decode'
),

layer_schedule as (
    select
        model,
        template
    from base_layer_schedule
),

layers_per_template as (
    select
        model,
        template,
        count(*) as layers
    from layer_schedule
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
    group by model, template, kind, growth
),

joined as (
    select
        g.model,
        d.dtype,
        g.template,
        g.kind,
        g.growth,
        l.layers,
        g.elements_per_token,
        g.elements_per_token * d.bytes as bytes_per_token,
        g.state_elements_per_request,
        g.state_elements_per_request * d.bytes as state_bytes_per_request
    from per_group as g
    cross join dtypes as d
    left join layers_per_template as l on l.model = g.model and l.template = g.template
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
