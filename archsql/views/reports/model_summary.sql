-- One row per model: parameter totals and the headline dims.
with

models as (
    select * from base_models
),

node_params as (
    select * from int_node_params
),

decoder_layers as (
    select
        s.model,
        s.layer
    from base_layer_schedule as s
    inner join base_stacks as st on st.model = s.model and st.stack = s.stack
    where st.role = 'decoder'
),

dims as (
    select * from base_dims
),

params_per_model as (
    select
        model,
        sum(params)::bigint as params,
        sum(active_params)::bigint as active_params,
        coalesce(sum(params) filter (where role in ('embedding', 'lm_head') and in_base_model), 0)::bigint
            as embedding_params,
        coalesce(sum(params) filter (where not in_base_model), 0)::bigint as mtp_params
    from node_params
    group by model
),

layers_per_model as (
    select
        model,
        count(*) as layers
    from decoder_layers
    group by model
),

dims_per_model as (
    select
        model,
        max(value) filter (where dim = 'd_model') as hidden_size,
        max(value) filter (where dim = 'vocab') as vocab_size,
        max(value) filter (where dim = 'max_context') as max_context
    from dims
    group by model
),

joined as (
    select
        m.model,
        m.hf_id,
        coalesce(p.params, 0) as params,
        coalesce(p.active_params, 0) as active_params,
        coalesce(p.embedding_params, 0) as embedding_params,
        coalesce(p.params, 0) - coalesce(p.embedding_params, 0) - coalesce(p.mtp_params, 0) as body_params,
        coalesce(p.mtp_params, 0) as mtp_params,
        coalesce(l.layers, 0) as layers,
        d.hidden_size,
        d.vocab_size,
        d.max_context
    from models as m
    left join params_per_model as p on p.model = m.model
    left join layers_per_model as l on l.model = m.model
    left join dims_per_model as d on d.model = m.model
)

select
    model,
    hf_id,
    params,
    active_params,
    embedding_params,
    body_params,
    mtp_params,
    layers,
    hidden_size,
    vocab_size,
    max_context
from joined
