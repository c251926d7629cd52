-- kernel_hbm_bytes(...): the bytes one measured kernel must move to or from device memory
-- at least once (inputs read, outputs written, weights and caches read), from its workload
-- signature; a_bytes, w_bytes, kv_bytes are the sizes of its activation, weight and KV
-- dtypes.  Null for op kinds without a formula.  Compulsory traffic only, so an implied
-- bandwidth (MBU) is never overstated:
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
--   moe                 w·touched·hidden·(inter/tp)·(3 gated | 2) + 2·a·(tokens·topk/ep)·hidden
--   mlp                 w·hidden·(inter/tp)·(3 gated | 2) + 2·a·tokens·hidden
--   rmsnorm             a·(2·tokens·hidden + hidden)
--   quantize            a·m·k  (the quantized output written once)
create or replace macro kernel_hbm_bytes(
    op_kind, phase, m, n, k, batch, q_len, kv_len, heads, kv_heads, head_dim, v_head_dim, window_size,
    kv_lora_rank, rope_dim, tokens, hidden, inter, topk, experts, tp, ep, gated, routing,
    a_bytes, w_bytes, kv_bytes
) as
case op_kind
    when 'gemm' then a_bytes * (m::double * k + m::double * n) + w_bytes * n::double * k
    when 'grouped_gemm' then a_bytes * tokens::double * topk * (k + n)
        + w_bytes * n::double * k * kernel_experts_touched(tokens, topk, experts, 1, routing)
    when 'attention' then a_bytes * batch::double * q_len * heads * (head_dim + coalesce(v_head_dim, head_dim))
        + kv_bytes * batch::double * kv_heads * (head_dim + coalesce(v_head_dim, head_dim))
        * case when coalesce(window_size, 0) > 0 then least(kv_len, window_size + q_len - 1) else kv_len end
    when 'encoder_attention' then 4 * a_bytes * batch::double * q_len * heads * head_dim
    when 'mla' then case
        when phase = 'decode'
            then kv_bytes * batch::double * kv_len * (kv_lora_rank + rope_dim)
                + a_bytes * batch::double * q_len * heads * (2 * kv_lora_rank + rope_dim)
        else (kv_bytes * kv_len + a_bytes * q_len) * batch::double * heads * (head_dim + rope_dim + v_head_dim)
    end
    when 'mla_bmm' then heads * (a_bytes * tokens::double * (kv_lora_rank + head_dim)
        + w_bytes * kv_lora_rank::double * head_dim)
    when 'moe' then w_bytes * kernel_experts_touched(tokens, topk, experts, ep, routing) * hidden::double
        * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
        + 2 * a_bytes * tokens::double * topk / coalesce(ep, 1) * hidden
    when 'mlp' then w_bytes * hidden::double * inter / coalesce(tp, 1) * case when gated then 3 else 2 end
        + 2 * a_bytes * tokens::double * hidden
    when 'rmsnorm' then a_bytes * (2 * tokens::double * hidden + hidden)
    when 'quantize' then a_bytes * m::double * k
end;
