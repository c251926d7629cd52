-- Every cache entry of every phase with its growth law stated as one term row per instance,
-- plus its per-token growth and fixed state of a whole model.  The only place the views read
-- a growth law.
with

caches as (
    select * from base_caches
),

nodes as (
    select *
    from base_nodes
    where in_base_model
),

instances as (
    select * from base_instances
),

phases as (
    select
        model,
        uid,
        'prefill' as phase
    from nodes
    where in_prefill
    union all
    select
        model,
        uid,
        'decode' as phase
    from nodes
    where in_decode
),

entries as (
    select
        c.model,
        p.phase,
        c.uid,
        n.stack,
        n.template,
        n.role,
        c.* exclude (model, uid),
        i.count
    from caches as c
    inner join phases as p on p.model = c.model and p.uid = c.uid
    inner join nodes as n on n.model = c.model and n.uid = c.uid
    inner join instances as i on i.model = c.model and i.uid = c.uid
),

-- cached positions per request at context c, as (e_c, factor, factor_arg):
-- per_token c; window min(c, window), c when window = 0; compressed ceil(c / ratio); state 1
-- chunk (chunked attention; the chunk length is in "window"): chunk_len(c, window), the
-- latest token's chunk; c when window = 0
with_law as (
    select
        *,
        case
            when growth = 'per_token' then 1
            when growth in ('window', 'chunk') and "window" = 0 then 1
            else 0
        end::tinyint as e_c,
        case
            when growth = 'window' and "window" > 0 then 'min_c'
            when growth = 'chunk' and "window" > 0 then 'chunk_len'
            when growth = 'compressed' then 'ceil_c_div'
            else 'none'
        end as factor,
        case
            when growth in ('window', 'chunk') and "window" > 0 then "window"
            when growth = 'compressed' then ratio
            else 0
        end::bigint as factor_arg,
        -- d(positions)/dc below every window (and within the first chunk): 1 per token,
        -- 1/ratio compressed, 0 state
        case
            when growth in ('per_token', 'window', 'chunk') then 1.0
            when growth = 'compressed' then 1.0 / ratio
            else 0.0
        end as positions_per_token,
        case when growth = 'state' then 1 else 0 end as state_positions
    from entries
),

final as (
    select
        *,
        elements::double as coef,
        1::tinyint as e_B,
        0::tinyint as e_s,
        elements * count * positions_per_token as elements_per_token,
        elements * count * state_positions as state_elements
    from with_law
)

select
    model,
    phase,
    uid,
    stack,
    template,
    role,
    cache,
    kind,
    growth,
    elements,
    "window",
    ratio,
    dtype as storage_rule,
    scale_dtype,
    scale_block,
    count,
    coef,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    elements_per_token,
    state_elements
from final
