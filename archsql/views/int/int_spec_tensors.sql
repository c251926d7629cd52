-- Every tensor the spec expects on disk: stored tensor templates expanded over their layers
-- ({layer}) and the node's copies per layer ({expert}), with the canonical name they are
-- matched by (the longest multimodal wrapper prefix normalized) — for the checkpoint's own
-- storage and for the precision profiles a checkpoint is reconciled against.
with

reconciled as (
    select distinct
        model,
        profile
    from base_checkpoints
),

storage as (
    select b.*
    from int_storage_bytes as b
    where
        b.profile = 'native'
        or exists (select 1 from reconciled as r where r.model = b.model and r.profile = b.profile)
),

prefixes as (
    select * from base_checkpoint_prefixes
),

per_layer as (
    select
        *,
        unnest(coalesce(layers, [null::integer])) as layer
    from storage
),

per_copy as (
    select
        *,
        unnest(
            case when contains(name, '{expert}') then range(copies_per_layer) else [null::bigint] end
        ) as expert
    from per_layer
),

named as (
    select
        *,
        replace(
            replace(name, '{layer}', coalesce(layer::varchar, '{layer}')), '{expert}', coalesce(expert::varchar, '{expert}')
        ) as spec_name
    from per_copy
),

with_prefix as (
    select
        n.*,
        coalesce(p.canonical || substr(n.spec_name, length(p.prefix) + 1), n.spec_name) as canonical_name
    from named as n
    left join prefixes as p on starts_with(n.spec_name, p.prefix)
    qualify row_number() over (
        partition by n.model, n.profile, n.uid, n.tensor, n.part, n.spec_name order by length(p.prefix) desc nulls last
    ) = 1
)

select
    model,
    profile,
    uid,
    role,
    tensor,
    part,
    scheme,
    rule,
    layer,
    expert,
    spec_name,
    canonical_name,
    dtype,
    shape,
    packing,
    elements,
    bytes
from with_prefix
