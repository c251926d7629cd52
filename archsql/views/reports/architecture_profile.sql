-- The structural profile of every model: headline dims, attention type and pattern, state, layer schedule.
with

models as (
    select model
    from base_models
),

dims as (
    select * from base_dims
),

decoder_stacks as (
    select
        model,
        stack
    from base_stacks
    where role = 'decoder'
),

nodes as (
    select
        n.model,
        n.uid,
        n.template,
        n.op,
        n.role
    from base_nodes as n
    inner join decoder_stacks as d on d.model = n.model and d.stack = n.stack
),

caches as (
    select * from base_caches
),

dim_values as (
    select
        model,
        max(value) filter (where dim = 'd_model') as hidden_size,
        max(value) filter (where dim = 'n_heads') as num_attention_heads,
        max(value) filter (where dim = 'n_kv_heads') as num_key_value_heads,
        max(value) filter (where dim = 'd_head') as d_head,
        max(value) filter (where dim = 'd_qk_nope') as d_qk_nope,
        max(value) filter (where dim = 'd_qk_rope') as d_qk_rope,
        max(value) filter (where dim = 'd_kv_lora') as kv_lora_rank,
        max(value) filter (where dim = 'd_ff') as intermediate_size,
        max(value) filter (where dim = 'd_ff_expert') as moe_intermediate_size,
        max(value) filter (where dim = 'n_experts') as num_experts,
        max(value) filter (where dim = 'top_k') as num_experts_per_tok,
        max(value) filter (where dim = 'vocab') as vocab_size,
        max(value) filter (where dim = 'index_topk') as index_topk,
        max(value) filter (where dim = 'n_index_heads') as n_index_heads,
        max(value) filter (where dim = 'd_index_head') as d_index_head
    from dims
    group by model
),

layers_per_template as (
    select
        t.model,
        t.template,
        sum(t.layers)::bigint as layers,
        min(t.first_layer) as first_layer
    from int_template_layers as t
    inner join decoder_stacks as d on d.model = t.model and d.stack = t.stack
    group by t.model, t.template
),

schedule_text as (
    select
        model,
        sum(layers) as num_hidden_layers,
        string_agg(template || '×' || layers, ',' order by first_layer) as layer_schedule
    from layers_per_template
    group by model
),

-- token mixers of each decoder template: attention, linear attention, state-space
mixers as (
    select distinct
        model,
        template,
        role
    from nodes
    where role in ('attention', 'linear_attention', 'ssm')
),

mixer_roles as (
    select
        model,
        bool_or(role = 'attention') as has_attention,
        string_agg(distinct role, '+' order by role) filter (where role <> 'attention') as recurrent_roles
    from mixers
    group by model
),

decoder_caches as (
    select
        n.model,
        n.template,
        n.role,
        c.cache,
        c.kind,
        c.growth,
        c."window",
        c.ratio
    from caches as c
    inner join nodes as n on n.model = c.model and n.uid = c.uid
),

state_text as (
    select
        model,
        string_agg(distinct cache, '+' order by cache) as state_representation,
        bool_or(cache = 'mla') as has_mla
    from decoder_caches
    group by model
),

-- the attention access pattern of each decoder template that attends; sparse attention
-- (DSA) attends the top-k keys an indexer selected, in the layer or shared from an earlier one
sparse_templates as (
    select distinct
        model,
        template
    from nodes
    where op = 'sparse_attention_score'
),

template_access as (
    select
        model,
        template,
        max(
            case
                when growth = 'window' and "window" > 0 then 'window:' || "window"
                when growth = 'chunk' and "window" > 0 then 'chunk:' || "window"
                when growth = 'compressed' then 'compressed:' || ratio
                else 'full'
            end
        ) as access
    from decoder_caches
    where role = 'attention'
    group by model, template
),

attending_templates as (
    select
        m.model,
        m.template,
        case
            when sp.template is not null
                then 'sparse_topk:' || d.index_topk || '/indexer:' || d.n_index_heads || 'x' || d.d_index_head
            else coalesce(a.access, 'full')
        end as access
    from mixers as m
    left join sparse_templates as sp on sp.model = m.model and sp.template = m.template
    left join template_access as a on a.model = m.model and a.template = m.template
    left join dim_values as d on d.model = m.model
    where m.role = 'attention'
),

pattern_layers as (
    select
        a.model,
        a.access,
        sum(l.layers) as layers
    from attending_templates as a
    inner join layers_per_template as l on l.model = a.model and l.template = a.template
    group by a.model, a.access
),

pattern_text as (
    select
        model,
        string_agg(access || '×' || layers, ',' order by access) as attention_pattern
    from pattern_layers
    group by model
),

joined as (
    select
        m.model,
        d.hidden_size,
        coalesce(s.num_hidden_layers, 0) as num_hidden_layers,
        d.num_attention_heads,
        d.num_key_value_heads,
        coalesce(d.d_head, d.d_qk_nope + d.d_qk_rope) as head_dim,
        d.kv_lora_rank,
        case
            when not coalesce(r.has_attention, false) then 'none'
            when r.recurrent_roles is not null then 'hybrid'
            when coalesce(st.has_mla, false) then 'MLA'
            when d.num_key_value_heads is null or d.num_key_value_heads = d.num_attention_heads then 'MHA'
            when d.num_key_value_heads = 1 then 'MQA'
            else 'GQA'
        end as attention_type,
        r.recurrent_roles as recurrent_mixers,
        d.intermediate_size,
        d.moe_intermediate_size,
        d.num_experts,
        d.num_experts_per_tok,
        d.vocab_size,
        coalesce(st.state_representation, 'none') as state_representation,
        coalesce(p.attention_pattern, 'none') as attention_pattern,
        s.layer_schedule
    from models as m
    left join dim_values as d on d.model = m.model
    left join schedule_text as s on s.model = m.model
    left join mixer_roles as r on r.model = m.model
    left join state_text as st on st.model = m.model
    left join pattern_text as p on p.model = m.model
)

select
    model,
    hidden_size,
    num_hidden_layers,
    num_attention_heads,
    num_key_value_heads,
    head_dim,
    kv_lora_rank,
    attention_type,
    recurrent_mixers,
    intermediate_size,
    moe_intermediate_size,
    num_experts,
    num_experts_per_tok,
    vocab_size,
    state_representation,
    attention_pattern,
    layer_schedule
from joined
