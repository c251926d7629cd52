-- cache_storage_dtype(rule, kv_dtype, act_dtype, scale_dtype, scale_block): the dtype a cache
-- entry is stored in, as text: the rule resolved ('kv' → kv_dtype, 'act' → act_dtype, a fixed
-- dtype as itself), with its scale when it has one ('fp8+fp32/128').
create or replace macro cache_storage_dtype(rule, kv_dtype, act_dtype, scale_dtype, scale_block) as
(case rule when 'kv' then kv_dtype when 'act' then act_dtype else rule end)
|| coalesce('+' || scale_dtype || '/' || scale_block::varchar, '');
