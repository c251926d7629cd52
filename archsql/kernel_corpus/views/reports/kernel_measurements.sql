-- Every measurement with its op family, a readable id and the work and utilization its
-- signature implies: the corpus as users query it.
with

corpus as (
    select *
    from base_kernel_corpus
),

op_kinds as (
    select
        op_kind,
        family
    from base_kernel_op_kinds
),

work as (
    select
        source_hash,
        source_row,
        op_kind,
        flops,
        hbm_bytes,
        link_bytes,
        mfu,
        mbu,
        link_util
    from int_kernel_corpus_work
)

select
    c.source_hash || ':' || c.source_row || ':' || c.op_kind as measurement_id,
    o.family,
    c.*,
    w.flops,
    w.hbm_bytes,
    w.link_bytes,
    w.mfu,
    w.mbu,
    w.link_util
from corpus as c
left join op_kinds as o on o.op_kind = c.op_kind
left join work as w on w.source_hash = c.source_hash and w.source_row = c.source_row and w.op_kind = c.op_kind
