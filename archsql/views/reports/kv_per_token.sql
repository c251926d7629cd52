-- Per-token cache size of every model in every dtype.
with

models as (
    select model
    from base_models
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

caches as (
    select
        model,
        uid,
        elements_per_token
    from base_caches
    where growth = 'per_token'
),

instances as (
    select
        model,
        uid,
        count
    from base_instances
),

nodes as (
    select
        model,
        uid,
        stack,
        template
    from base_nodes
),

layer_schedule as (
    select
        model,
        stack,
        layer,
        template
    from base_layer_schedule
),

elements_per_model as (
    select
        c.model,
        sum(c.elements_per_token * i.count)::bigint as elements_per_token
    from caches as c
    inner join instances as i on i.model = c.model and i.uid = c.uid
    group by c.model
),

cached_templates as (
    select distinct
        c.model,
        n.stack,
        n.template
    from caches as c
    inner join nodes as n on n.model = c.model and n.uid = c.uid
),

cached_layers as (
    select
        s.model,
        count(*) as cache_layers
    from layer_schedule as s
    inner join cached_templates as t
        on t.model = s.model and t.stack = s.stack and t.template = s.template
    group by s.model
),

joined as (
    select
        m.model,
        d.dtype,
        coalesce(e.elements_per_token, 0) as elements_per_token,
        coalesce(e.elements_per_token, 0) * d.bytes as bytes_per_token,
        coalesce(l.cache_layers, 0) as cache_layers
    from models as m
    cross join dtypes as d
    left join elements_per_model as e on e.model = m.model
    left join cached_layers as l on l.model = m.model
)

select
    model,
    dtype,
    elements_per_token,
    bytes_per_token,
    cache_layers
from joined
