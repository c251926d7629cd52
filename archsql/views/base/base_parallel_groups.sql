-- The layout groups each mesh axis sizes (reference table, written from archsql.schema.parallel).
select
    "group",
    axis,
    cp_kind,
    default_degree,
    position,
    shards
from parallel_groups
