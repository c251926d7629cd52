-- kernel_flops(...): the floating-point operations one measured kernel must do, from its
-- workload signature (kernel_corpus columns); null for op kinds without a formula (model-
-- specific modules, scans, element-wise and communication ops).  Lower bounds where the
-- kernel may skip work, so an implied MFU is never overstated:
--   gemm                2·m·n·k
--   grouped_gemm        2·tokens·topk·n·k
--   attention           2·batch·heads·(head_dim + v_head_dim)·pairs, pairs = the causal
--                       (query, key) pairs under the window: window_pairs(q_len, kv_len, w)
--   encoder_attention   2·batch·heads·2·head_dim·q_len²  (bidirectional)
--   mla                 2·batch·heads·pairs·width; width = head_dim + rope_dim + v_head_dim
--                       in prefill, 2·kv_lora_rank + rope_dim absorbed in decode
--   mla_bmm             2·tokens·heads·kv_lora_rank·head_dim
--   moe                 2·(tokens·topk/ep)·hidden·(inter/tp)·(3 gated | 2)
--   mlp                 2·tokens·hidden·(inter/tp)·(3 gated | 2)
-- gated null counts 2 projections (the lower bound).
create or replace macro kernel_flops(
    op_kind, phase, m, n, k, batch, q_len, kv_len, heads, head_dim, v_head_dim, window_size,
    kv_lora_rank, rope_dim, tokens, hidden, inter, topk, experts, tp, ep, gated
) as
case op_kind
    when 'gemm' then 2::double * m * n * k
    when 'grouped_gemm' then 2::double * tokens * topk * n * k
    when 'attention' then 2::double * batch * heads * (head_dim + coalesce(v_head_dim, head_dim))
        * window_pairs(q_len, kv_len, case when coalesce(window_size, 0) > 0 then window_size else kv_len end)
    when 'encoder_attention' then 4::double * batch * heads * head_dim * q_len * q_len
    when 'mla' then 2::double * batch * heads * window_pairs(q_len, kv_len, kv_len)
        * case when phase = 'decode' then 2 * kv_lora_rank + rope_dim else head_dim + rope_dim + v_head_dim end
    when 'mla_bmm' then 2::double * tokens * heads * kv_lora_rank * head_dim
    when 'moe' then 2::double * tokens * topk / coalesce(ep, 1) * hidden * inter / coalesce(tp, 1)
        * case when gated then 3 else 2 end
    when 'mlp' then 2::double * tokens * hidden * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
end;
