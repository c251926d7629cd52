-- kernel_interp_axes(...): the axes along which kernel_estimates interpolates a measured time
-- between the points of the corpus's grid, per op kind: `fields`, the signature fields the
-- axes replace (a point's other signature fields must equal the estimated kernel's), and `x`,
-- three positive coordinates (an unused axis is 1).  Interpolation is linear in ln(x).
--   gemm           m, n, k                     (tokens; output and reduction width)
--   attention      batch, q_len, kv_len        as batch, q_len and the cached tokens + 1
--                                              (kv_len - q_len + 1): prefill moves q_len,
--                                              decode the cache, each on its own axis
--   moe,           tokens                      (before routing; experts and widths fixed)
--   grouped_gemm
--   rmsnorm        tokens
--   all_reduce     message_bytes
-- Null for other op kinds: only an exact measurement or the fallback estimates them.
create or replace macro kernel_interp_axes(op_kind, m, n, k, batch, q_len, kv_len, tokens, message_bytes) as
case
    when op_kind = 'gemm' then {'fields': ['m', 'n', 'k'], 'x': [m, n, k]::double[]}
    when op_kind = 'attention'
        then {'fields': ['batch', 'q_len', 'kv_len'], 'x': [batch, q_len, kv_len - q_len + 1]::double[]}
    when op_kind in ('moe', 'grouped_gemm', 'rmsnorm') then {'fields': ['tokens'], 'x': [tokens, 1, 1]::double[]}
    when op_kind = 'all_reduce' then {'fields': ['message_bytes'], 'x': [message_bytes, 1, 1]::double[]}
end;
