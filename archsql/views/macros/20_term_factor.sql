-- term_factor(factor, arg, s, c, v := 0): the named factor of a term row (terms.factor,
-- terms.factor_arg) at a workload with s new tokens per request, context c and v image
-- patches per request (workload_images; 0 for text); the value of
-- archsql.evaluator.factors.factor_value.  An unknown factor name is an error, never 1.
--   none          1
--   min_c         least(c, arg)              positions capped by a window
--   ceil_c_div    ceil(c / arg), in integers  positions compressed by a ratio
--   window_pairs  window_pairs(s, c, arg)    causal pairs under a sliding window
--   chunk_len     chunk_len(c, arg)          positions of the current attention chunk
--   chunk_pairs   chunk_pairs(s, c, arg)     causal pairs under chunked attention
--   patches       v^arg                      a vision tower's image patches
create or replace macro term_factor(factor, arg, s, c, v := 0) as
case factor
    when 'none' then 1
    when 'min_c' then least(c, arg)
    when 'ceil_c_div' then (c + arg - 1) // arg
    when 'window_pairs' then window_pairs(s, c, arg)
    when 'chunk_len' then chunk_len(c, arg)
    when 'chunk_pairs' then chunk_pairs(s, c, arg)
    when 'patches' then power(v, arg)::BIGINT
    else error('unknown term factor ''' || factor
        || '''; known: none, min_c, ceil_c_div, window_pairs, chunk_len, chunk_pairs, patches')
end;
