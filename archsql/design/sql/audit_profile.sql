-- Profiles of the two models of an audit: the architecture_profile row of each and every
-- bound dim.  Parameters: $baseline, $candidate.
select
    'profile' as source,
    p.model,
    f.field,
    f.value
from architecture_profile as p
cross join lateral (
    select
        unnest([
            'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'num_key_value_heads', 'head_dim',
            'kv_lora_rank', 'attention_type', 'recurrent_mixers', 'intermediate_size', 'moe_intermediate_size',
            'num_experts', 'num_experts_per_tok', 'vocab_size', 'state_representation', 'attention_pattern',
            'layer_schedule'
        ]) as field,
        unnest([
            p.hidden_size::varchar, p.num_hidden_layers::varchar, p.num_attention_heads::varchar,
            p.num_key_value_heads::varchar, p.head_dim::varchar, p.kv_lora_rank::varchar, p.attention_type,
            p.recurrent_mixers, p.intermediate_size::varchar, p.moe_intermediate_size::varchar,
            p.num_experts::varchar, p.num_experts_per_tok::varchar, p.vocab_size::varchar,
            p.state_representation, p.attention_pattern, p.layer_schedule
        ]) as value
) as f
where p.model in ($baseline, $candidate)
union all
select
    'dim' as source,
    model,
    dim as field,
    value::varchar as value
from base_dims
where model in ($baseline, $candidate) and kind <> 'context'
