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

per_group as (
    select
        model,
        workload,
        template,
        kind,
        growth,
        sum(value) as elements
    from quantities
    group by all
),

joined as (
    select
        g.*,
        l.layers,
        d.dtype,
        g.elements * d.bytes as bytes
    from per_group as g
    cross join dtypes as d
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
    elements,
    bytes
from joined
