-- The storage rule of the cache each cache-reading node reads: a node's cache reads come from
-- its own cache (a recurrent state it carries) or from the node feeding its port 1 (the keys /
-- values of an attention score or apply, the index keys of a lightning indexer) —
-- Primitive.cache_reads.  A port-1 source that declares no cache of its own (a concat of the
-- latent and the rope key) is read in the kv dtype, as its parts are.
with

caches as (
    select distinct
        model,
        uid,
        dtype as storage_rule,
        scale_dtype,
        scale_block
    from base_caches
),

readers as (
    select distinct
        model,
        phase,
        uid
    from base_terms
    where quantity = 'cache_read_elements'
),

port_one as (
    select
        model,
        phase,
        dst_uid as uid,
        src_uid
    from base_edges
    where port = 1
),

resolved as (
    select
        r.model,
        r.phase,
        r.uid,
        coalesce(own.storage_rule, src.storage_rule, 'kv') as storage_rule,
        case when own.uid is not null then own.scale_dtype else src.scale_dtype end as scale_dtype,
        case when own.uid is not null then own.scale_block else src.scale_block end as scale_block
    from readers as r
    left join caches as own on own.model = r.model and own.uid = r.uid
    left join port_one as p on p.model = r.model and p.phase = r.phase and p.uid = r.uid
    left join caches as src on src.model = p.model and src.uid = p.src_uid
)

select
    model,
    phase,
    uid,
    storage_rule,
    scale_dtype,
    scale_block
from resolved
