-- cache_element_bytes(rule, kv_bytes, act_bytes, fixed_bytes, scale_bytes, scale_block): bytes
-- one cached element takes under its cache entry's storage rule (caches.dtype): 'kv' the
-- deployment's kv dtype, 'act' its activation dtype, otherwise the fixed dtype's own bytes
-- (fixed_bytes, the dtypes row of that name); plus, for a scaled format, one scale of
-- scale_bytes per scale_block elements (DeepSeek-V3.2's FP8 index keys: 1 + 4/128).  The one
-- definition, used by every view that sizes a cache.
create or replace macro cache_element_bytes(rule, kv_bytes, act_bytes, fixed_bytes, scale_bytes, scale_block) as
(case rule when 'kv' then kv_bytes when 'act' then act_bytes else fixed_bytes end)
+ coalesce(scale_bytes / scale_block, 0);
