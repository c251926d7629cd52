-- kernel_hbm_bytes(...): the bytes one measured kernel must move to or from device memory
-- at least once (inputs read, outputs written, weights and caches read), from its workload
-- signature; a_bytes, w_bytes, kv_bytes are the sizes of its activation, weight and KV (or
-- recurrent state) dtypes.  Null where a field a formula needs is missing.  Compulsory
-- traffic only, so an implied bandwidth (MBU) is never overstated; derivations in
-- docs/kernel_corpus.md, "Work formulas".  "step" below: 2 in decode (the cache or state
-- read and written back in place), 1 in verify (read), 0 in prefill (no earlier state).
--   gemm                a·(m·k + m·n) + w·n·k
--   grouped_gemm        a·tokens·topk·(k + n) + w·n·k·experts touched (balanced)
--   attention           a·batch·q_len·heads·(head_dim + v_head_dim)                 q, out
--                       + kv·batch·kv_heads·(head_dim + v_head_dim)·keys            K, V
--                       keys = least(kv_len, window_size + q_len - 1) with a window
--   encoder_attention   4·a·batch·q_len·heads·head_dim                              q, k, v, out
--   mla  decode         kv·batch·kv_len·(kv_lora_rank + rope_dim)                   latent cache
--                       + a·batch·q_len·heads·(2·kv_lora_rank + rope_dim)           q, out
--        prefill        (kv·kv_len + a·q_len)·batch·heads·(head_dim + rope_dim + v_head_dim)
--   mla_bmm             heads·(a·tokens·(kv_lora_rank + head_dim) + w·kv_lora_rank·head_dim)
--   moe, moe_module     w·touched·hidden·(inter/tp)·(3 gated | 2) + 2·a·(tokens·topk/ep)·hidden
--   mlp                 w·hidden·(inter/tp)·(3 gated | 2) + 2·a·tokens·hidden
--   rmsnorm             a·(2·tokens·hidden + hidden)
--   quantize            a·m·k         (the input read once, at least as wide as dtype; a scale-only
--                                      kernel — aiconfigurator's compute_scale — writes no copy)
--   mhc                 2·a·tokens·hidden                 (one stream read, one written, at least)
--   causal_conv1d       a·(2·tokens·hidden + hidden·conv_kernel) + step·a·batch·hidden·(conv_kernel - 1)
--   gdn, kda            a·tokens·(2·kv_heads·head_dim + 2·heads·v_head_dim + heads·g + heads)
--                       + step·kv·batch·heads·head_dim·v_head_dim
--                       q, k in; v in, out; gate (g = 1 per head for gdn, head_dim for kda); beta
--   mamba2              a·tokens·(2·heads·head_dim + 2·ssm_groups·state_dim + heads)
--                       + step·kv·batch·heads·head_dim·state_dim          x, y, B, C, dt; state
--   mla_module,         w·(hidden·(L + R) + heads·L·(N + V) + heads·V·hidden)     kv_a, kv_b, o weights
--   dsa_module          + 2·a·batch·q_len·hidden                                  module in, out
--                       + kv·batch·greatest(q_len, least(kv_len, index_topk))·(L + R)  latent entries
--   msa_module          w·hidden·head_dim·(2·heads + 2·kv_heads) + 2·a·batch·q_len·hidden
--                       + kv·batch·kv_heads·greatest(q_len, least(kv_len, index_topk))·(head_dim + v_head_dim)
--   dsa_attn            a·batch·q_len·heads·(2·kv_lora_rank + rope_dim)
--                       + kv·batch·least(kv_len, index_topk)·(kv_lora_rank + rope_dim)
--   dsv4_*_module       2·a·batch·q_len·hidden + kv·batch·E·head_dim,     E = least(kv_len, window)
--   dsv4_hca_attn       a·batch·q_len·heads·(head_dim + v_head_dim) + kv·batch·E·head_dim
--                       + least(index_topk (CSA), kv_len // compress_ratio): entries the last query reads
--   mqa_logits          a·batch·q_len·heads·head_dim + kv·batch·(kv_len // ratio)·head_dim
--                       + 4·batch·C                      (q; index keys; fp32 logits written)
--   sparse_topk         4·batch·C + 4·batch·q_len·least(index_topk, kv_len // ratio)
--                       (fp32 scores read; int32 indices written)
--   moe_dispatch,       a·tokens·hidden                   (the rank's tokens read / written back)
--   moe_combine
--   moe_a2a_prepare     4·tokens·topk                     (the rank's int32 expert ids)
-- C = kernel_compressed_pairs(q_len, kv_len, compress_ratio or 1, null).  The collectives
-- have no formula here (their bound is the link, kernel_link_bytes).
create or replace macro kernel_hbm_bytes(
    op_kind, phase, m, n, k, batch, q_len, kv_len, heads, kv_heads, head_dim, v_head_dim, window_size,
    kv_lora_rank, rope_dim, index_topk, compress_ratio, state_dim, conv_kernel, ssm_groups,
    tokens, hidden, inter, topk, experts, tp, ep, gated, routing,
    a_bytes, w_bytes, kv_bytes
) as
case
    when op_kind = 'gemm' then a_bytes * (m::double * k + m::double * n) + w_bytes * n::double * k
    when op_kind = 'grouped_gemm' then a_bytes * tokens::double * topk * (k + n)
        + w_bytes * n::double * k * kernel_experts_touched(tokens, topk, experts, 1, routing)
    when op_kind = 'attention' then a_bytes * batch::double * q_len * heads * (head_dim + coalesce(v_head_dim, head_dim))
        + kv_bytes * batch::double * kv_heads * (head_dim + coalesce(v_head_dim, head_dim))
        * case when coalesce(window_size, 0) > 0 then least(kv_len, window_size + q_len - 1) else kv_len end
    when op_kind = 'encoder_attention' then 4 * a_bytes * batch::double * q_len * heads * head_dim
    when op_kind = 'mla' then case
        when phase = 'decode'
            then kv_bytes * batch::double * kv_len * (kv_lora_rank + rope_dim)
                + a_bytes * batch::double * q_len * heads * (2 * kv_lora_rank + rope_dim)
        else (kv_bytes * kv_len + a_bytes * q_len) * batch::double * heads * (head_dim + rope_dim + v_head_dim)
    end
    when op_kind = 'mla_bmm' then heads * (a_bytes * tokens::double * (kv_lora_rank + head_dim)
        + w_bytes * kv_lora_rank::double * head_dim)
    when op_kind in ('moe', 'moe_module') then w_bytes * kernel_experts_touched(tokens, topk, experts, ep, routing)
        * hidden::double * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
        + 2 * a_bytes * tokens::double * topk / coalesce(ep, 1) * hidden
    when op_kind = 'mlp' then w_bytes * hidden::double * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
        + 2 * a_bytes * tokens::double * hidden
    when op_kind = 'rmsnorm' then a_bytes * (2 * tokens::double * hidden + hidden)
    when op_kind = 'quantize' then a_bytes * m::double * k
    when op_kind = 'mhc' then 2 * a_bytes * tokens::double * hidden
    when op_kind = 'causal_conv1d' then a_bytes * (2 * tokens::double * hidden + hidden::double * conv_kernel)
        + case phase when 'decode' then 2 when 'verify' then 1 else 0 end
        * a_bytes * batch::double * hidden * (conv_kernel - 1)
    when op_kind in ('gdn', 'kda') then a_bytes * tokens::double * (
            2 * coalesce(kv_heads, 1) * head_dim + 2 * heads * coalesce(v_head_dim, head_dim)
            + heads * case when op_kind = 'kda' then head_dim else 1 end + heads
        )
        + case phase when 'decode' then 2 when 'verify' then 1 else 0 end
        * kv_bytes * batch::double * heads * head_dim * coalesce(v_head_dim, head_dim)
    when op_kind = 'mamba2' then a_bytes * tokens::double * (
            2 * heads * head_dim + 2 * coalesce(ssm_groups, 1) * state_dim + heads
        )
        + case phase when 'decode' then 2 when 'verify' then 1 else 0 end
        * kv_bytes * batch::double * heads * head_dim * state_dim
    when op_kind in ('mla_module', 'dsa_module') then
        kv_bytes * batch::double * greatest(q_len, least(kv_len, coalesce(index_topk, kv_len)))
        * (kv_lora_rank + rope_dim)
        + coalesce(w_bytes * (hidden::double * (kv_lora_rank + rope_dim)
            + heads::double * kv_lora_rank * (head_dim + v_head_dim) + heads::double * v_head_dim * hidden), 0)
        + coalesce(2 * a_bytes * batch::double * q_len * hidden, 0)
    when op_kind = 'msa_module' then
        kv_bytes * batch::double * coalesce(kv_heads, 1) * greatest(q_len, least(kv_len, coalesce(index_topk, kv_len)))
        * (head_dim + coalesce(v_head_dim, head_dim))
        + coalesce(w_bytes * hidden::double * head_dim * (2 * heads + 2 * coalesce(kv_heads, 1)), 0)
        + coalesce(2 * a_bytes * batch::double * q_len * hidden, 0)
    when op_kind = 'dsa_attn' then a_bytes * batch::double * q_len * heads * (2 * kv_lora_rank + rope_dim)
        + kv_bytes * batch::double * least(kv_len, coalesce(index_topk, kv_len)) * (kv_lora_rank + rope_dim)
    when op_kind in ('dsv4_csa_module', 'dsv4_hca_module', 'dsv4_hca_attn') then
        kv_bytes * batch::double * head_dim * (
            least(kv_len, coalesce(window_size, 0))
            + coalesce(least(
                case when op_kind = 'dsv4_csa_module' then index_topk end, kv_len // compress_ratio
            ), 0)
        )
        + case when op_kind = 'dsv4_hca_attn'
            then a_bytes * batch::double * q_len * heads * (head_dim + coalesce(v_head_dim, head_dim))
            else coalesce(2 * a_bytes * batch::double * q_len * hidden, 0)
        end
    when op_kind = 'mqa_logits' then a_bytes * batch::double * q_len * heads * head_dim
        + kv_bytes * batch::double * (kv_len // coalesce(compress_ratio, 1)) * head_dim
        + 4 * batch::double * kernel_compressed_pairs(q_len, kv_len, coalesce(compress_ratio, 1), null)
    when op_kind = 'sparse_topk' then 4 * batch::double * (
            kernel_compressed_pairs(q_len, kv_len, coalesce(compress_ratio, 1), null)
            + q_len * least(coalesce(index_topk, 0), kv_len // coalesce(compress_ratio, 1))
        )
    when op_kind in ('moe_dispatch', 'moe_combine') then a_bytes * tokens::double * hidden
    when op_kind = 'moe_a2a_prepare' then 4 * tokens::double * topk
end;
