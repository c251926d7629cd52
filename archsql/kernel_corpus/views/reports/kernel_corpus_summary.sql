-- Rows of the kernel corpus per GPU × op family × library × library version.
with

corpus as (
    select
        gpu,
        op_kind,
        library,
        library_version,
        kernel,
        source_key
    from base_kernel_corpus
),

op_kinds as (
    select
        op_kind,
        family
    from base_kernel_op_kinds
),

grouped as (
    select
        c.gpu,
        o.family as op_family,
        c.library,
        c.library_version,
        count(*) as measurements,
        count(distinct c.op_kind) as op_kinds,
        count(distinct c.kernel) as kernels,
        count(distinct c.source_key) as sources
    from corpus as c
    left join op_kinds as o on o.op_kind = c.op_kind
    group by c.gpu, o.family, c.library, c.library_version
)

select
    gpu,
    op_family,
    library,
    library_version,
    measurements,
    op_kinds,
    kernels,
    sources
from grouped
