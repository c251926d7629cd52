-- Cache size of every model after every workload's step by layer group (block template) and cache kind, in every dtype.
with

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

quantities as (
    select
        model,
        workload,
        template,
        kind,
        growth,
        value
    from int_workload_terms
    where quantity = 'cache_elements'
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
        workload,
        template,
        kind,
        growth,
        sum(value) as elements
    from quantities
    group by model, workload, template, kind, growth
),

joined as (
    select
        g.model,
        g.workload,
        g.template,
        g.kind,
        g.growth,
        l.layers,
        d.dtype,
        g.elements,
        g.elements * d.bytes as bytes
    from per_group as g
    cross join dtypes as d
    left join layers_per_template as l on l.model = g.model and l.template = g.template
)

select
    model,
    workload,
    template,
    kind,
    growth,
    layers,
    dtype,
    elements,
    bytes
from joined
