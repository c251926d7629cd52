-- Tensors of the checkpoints with their size and the canonical name they are matched by.
with

tensors as (
    select * from base_checkpoint_tensors
),

prefixes as (
    select * from base_checkpoint_prefixes
),

with_prefix as (
    select
        t.checkpoint,
        t.file,
        t.name,
        t.dtype,
        t.shape,
        coalesce(list_product(t.shape), 1)::bigint as elements,
        t.offset_end - t.offset_begin as bytes,
        coalesce(p.canonical || substr(t.name, length(p.prefix) + 1), t.name) as canonical_name
    from tensors as t
    left join prefixes as p on starts_with(t.name, p.prefix)
    qualify row_number() over (partition by t.checkpoint, t.name order by length(p.prefix) desc nulls last) = 1
)

select
    checkpoint,
    file,
    name,
    canonical_name,
    dtype,
    shape,
    elements,
    bytes
from with_prefix
