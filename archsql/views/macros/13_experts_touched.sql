-- experts_touched(tokens, top_k, experts, local_experts, routing): the distinct routed experts
-- of one device whose weights a MoE step reads, when `tokens` tokens each pick top_k of
-- `experts` experts and the device holds local_experts of them.  The one definition, used by
-- the speed-of-light views (int_device_op_values) and the kernel corpus
-- (kernel_experts_touched).  routing names the token-to-expert distribution:
--   'uniform'   independent uniform routing, in expectation: a given expert is missed by one
--               token with probability 1 − top_k/experts, so local_experts·(1 − (1 − top_k/experts)^tokens)
--   'balanced'  a perfectly balanced assignment (aiconfigurator's 'uniform', balanced_logits):
--               the local (token, expert) pairs fill distinct experts,
--               least(local_experts, ceil(tokens·top_k·local_experts/experts))
--   other       a skewed distribution (power_law_1.2, …) is only known to touch at least the
--               share of one token's top_k, least(local_experts, greatest(1, ceil(top_k·local_experts/experts)))
-- A skew measured later plugs in here as another routing name.
create or replace macro experts_touched(tokens, top_k, experts, local_experts, routing) as
case
    when tokens <= 0 then 0
    when routing = 'uniform'
        then local_experts * (1 - power(1 - top_k::double / experts, tokens::double))
    when routing = 'balanced'
        then least(local_experts::double, ceil(tokens::double * top_k * local_experts / experts))
    else least(local_experts::double, greatest(1, ceil(top_k::double * local_experts / experts)))
end;
