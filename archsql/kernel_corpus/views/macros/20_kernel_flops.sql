-- kernel_flops(...): the floating-point operations one measured kernel must do, from its
-- workload signature (kernel_corpus columns).  Lower bounds where the kernel may skip work
-- or where the signature does not say everything, so an implied MFU is never overstated;
-- null where a field a formula needs is missing.  Derivations: docs/kernel_corpus.md,
-- "Work formulas".  P(s, c, w) = window_pairs(s, c, w): causal (query, key) pairs of s new
-- queries after c - s cached tokens, each seeing at most w keys.
--   gemm                2·m·n·k
--   grouped_gemm        2·tokens·topk·n·k
--   attention           2·batch·heads·(head_dim + v_head_dim)·P(q_len, kv_len, window or kv_len)
--   encoder_attention   2·batch·heads·2·head_dim·q_len²  (bidirectional)
--   mla                 2·batch·heads·P·width; width = head_dim + rope_dim + v_head_dim
--                       in prefill, 2·kv_lora_rank + rope_dim absorbed in decode
--   mla_bmm             2·tokens·heads·kv_lora_rank·head_dim
--   moe, moe_module     2·(tokens·topk/ep)·hidden·(inter/tp)·(3 gated | 2)
--   mlp                 2·tokens·hidden·(inter/tp)·(3 gated | 2)
--   rmsnorm             4·tokens·hidden              (x², sum, ·rsqrt, ·weight per element)
--   quantize            m·k                          (each element into the abs-max at least)
--   mhc                 2·tokens·hidden              (one multiply-add per element at least)
--   causal_conv1d       2·tokens·hidden·conv_kernel  (hidden = conv channels)
--   gdn, kda            6·tokens·heads·head_dim·v_head_dim  (state: v_head_dim × head_dim per
--                       value head; read with k, rank-1 update, read with q — recurrent or
--                       chunked, the three state products remain)
--   mamba2              4·tokens·heads·head_dim·state_dim   (state update x·Bᵀ, output h·C)
--   mla_module,         projections 2·batch·q_len·(hidden·(L + R) + heads·L·(N + V) + heads·V·hidden)
--   dsa_module          + core 2·batch·heads·least(Pk·(2L + R), Pk·(N + R + V) + U·L·(N + V))
--                       (L kv_lora_rank, R rope_dim, N head_dim, V v_head_dim; Pk = P capped
--                       at index_topk keys per query; absorbed vs non-absorbed, whichever is
--                       less; U = cached keys a non-absorbed kernel must up-project); the
--                       query low-rank path (q_lora_rank) and the indexer are not counted
--   msa_module          2·batch·q_len·hidden·head_dim·(2·heads + 2·kv_heads) + 2·batch·heads·
--                       Pk·(head_dim + v_head_dim)     (q, k, v, o projections; sparse GQA core)
--   dsa_attn            2·batch·heads·Pk·(2·kv_lora_rank + rope_dim)   (sparse absorbed MLA)
--   dsv4_csa_module,    2·batch·heads·(P(q_len, kv_len, window_size) + C)·(head_dim + v_head_dim),
--   dsv4_hca_module,    C = kernel_compressed_pairs(q_len, kv_len, compress_ratio, k): the
--   dsv4_hca_attn       compressed entries each query sees, k = index_topk for CSA, all for HCA
--   mqa_logits          2·batch·heads·head_dim·C(ratio, all)  (index heads and head dim)
-- No formula (null): sparse_topk (a selection: comparisons, no arithmetic to hold against a
-- FLOP peak) and the communication kinds (their bound is the link: kernel_link_bytes).
create or replace macro kernel_flops(
    op_kind, phase, m, n, k, batch, q_len, kv_len, heads, kv_heads, head_dim, v_head_dim, window_size,
    kv_lora_rank, rope_dim, index_topk, compress_ratio, state_dim, conv_kernel,
    tokens, hidden, inter, topk, experts, tp, ep, gated
) as
case
    when op_kind = 'gemm' then 2::double * m * n * k
    when op_kind = 'grouped_gemm' then 2::double * tokens * topk * n * k
    when op_kind = 'attention' then 2::double * batch * heads * (head_dim + coalesce(v_head_dim, head_dim))
        * window_pairs(q_len, kv_len, case when coalesce(window_size, 0) > 0 then window_size else kv_len end)
    when op_kind = 'encoder_attention' then 4::double * batch * heads * head_dim * q_len * q_len
    when op_kind = 'mla' then 2::double * batch * heads * window_pairs(q_len, kv_len, kv_len)
        * case when phase = 'decode' then 2 * kv_lora_rank + rope_dim else head_dim + rope_dim + v_head_dim end
    when op_kind = 'mla_bmm' then 2::double * tokens * heads * kv_lora_rank * head_dim
    when op_kind in ('moe', 'moe_module') then 2::double * tokens * topk / coalesce(ep, 1) * hidden * inter
        / coalesce(tp, 1) * case when gated then 3 else 2 end
    when op_kind = 'mlp' then 2::double * tokens * hidden * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
    when op_kind = 'rmsnorm' then 4::double * tokens * hidden
    when op_kind = 'quantize' then 1::double * m * k
    when op_kind = 'mhc' then 2::double * tokens * hidden
    when op_kind = 'causal_conv1d' then 2::double * tokens * hidden * conv_kernel
    when op_kind in ('gdn', 'kda') then 6::double * tokens * heads * head_dim * coalesce(v_head_dim, head_dim)
    when op_kind = 'mamba2' then 4::double * tokens * heads * head_dim * state_dim
    when op_kind in ('mla_module', 'dsa_module') then
        2::double * batch * heads * least(
            window_pairs(q_len, kv_len, coalesce(index_topk, kv_len))::double * (2 * kv_lora_rank + rope_dim),
            window_pairs(q_len, kv_len, coalesce(index_topk, kv_len))::double * (head_dim + rope_dim + v_head_dim)
            + greatest(0, least(kv_len, coalesce(index_topk, kv_len)) - q_len)::double
            * kv_lora_rank * (head_dim + v_head_dim)
        )
        + coalesce(2::double * batch * q_len * (hidden * (kv_lora_rank + rope_dim)
            + heads * kv_lora_rank * (head_dim + v_head_dim) + heads * v_head_dim * hidden), 0)
    when op_kind = 'msa_module' then
        2::double * batch * heads * (head_dim + coalesce(v_head_dim, head_dim))
        * window_pairs(q_len, kv_len, coalesce(index_topk, kv_len))
        + coalesce(2::double * batch * q_len * hidden * head_dim * (2 * heads + 2 * coalesce(kv_heads, 1)), 0)
    when op_kind = 'dsa_attn' then 2::double * batch * heads * (2 * kv_lora_rank + rope_dim)
        * window_pairs(q_len, kv_len, coalesce(index_topk, kv_len))
    when op_kind in ('dsv4_csa_module', 'dsv4_hca_module', 'dsv4_hca_attn') then
        2::double * batch * heads * (head_dim + coalesce(v_head_dim, head_dim)) * (
            coalesce(window_pairs(q_len, kv_len, window_size), 0)
            + coalesce(kernel_compressed_pairs(
                q_len, kv_len, compress_ratio, case when op_kind = 'dsv4_csa_module' then index_topk end
            ), 0)
        )
    when op_kind = 'mqa_logits' then 2::double * batch * heads * head_dim
        * kernel_compressed_pairs(q_len, kv_len, coalesce(compress_ratio, 1), null)
end;
