-- Whole-model terms of every quantity: per-instance terms times copies, grouped by role,
-- block template, cache kind and growth, monomial and factor.
with

node_terms as (
    select * exclude (port)
    from base_terms
    where quantity in ('flops', 'cache_read_elements')
),

instances as (
    select *
    from base_instances
),

nodes as (
    select
        model,
        uid,
        role,
        template
    from base_nodes
    where in_base_model
),

read_rules as (
    select * from int_cache_read_rules
),

cache_entries as (
    select
        model,
        phase,
        role,
        template,
        kind,
        growth,
        storage_rule,
        scale_dtype,
        scale_block,
        count,
        coef,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg
    from int_cache_entries
),

-- t.* exclude (...) keeps the monomial of a term: e_B, e_s, e_c, factor, factor_arg
scaled_node_terms as (
    select
        t.model,
        t.phase,
        t.quantity,
        n.role,
        n.template,
        null::varchar as kind,
        null::varchar as growth,
        rr.storage_rule,  -- cache reads: the rule of the cache read (null for flops)
        rr.scale_dtype,
        rr.scale_block,
        t.* exclude (model, phase, uid, quantity, coef),
        t.coef * i.count as coef
    from node_terms as t
    inner join instances as i on i.model = t.model and i.uid = t.uid
    inner join nodes as n on n.model = t.model and n.uid = t.uid
    left join read_rules as rr
        on rr.model = t.model and rr.phase = t.phase and rr.uid = t.uid and t.quantity = 'cache_read_elements'
),

scaled_caches as (
    select
        'cache_elements' as quantity,
        * exclude (count, coef),
        coef * count as coef
    from cache_entries
),

scaled as (
    select * from scaled_node_terms
    union all by name
    select * from scaled_caches
)

select
    * exclude (coef),
    sum(coef) as coef
from scaled
group by all
