-- kernel_experts_touched(tokens, topk, experts, ep, routing): routed experts of one device
-- whose weights a MoE step must read — the model store's experts_touched macro
-- (archsql/views/macros/13_experts_touched.sql), the one definition, at experts/ep local
-- experts.  The corpus's routing names map onto it: null, 'balanced' and aiconfigurator's
-- 'uniform' (its balanced_logits: a perfectly balanced assignment) are 'balanced', so the
-- rank's tokens*topk/ep pairs fill least(experts/ep, pairs) experts; any other distribution
-- (power law, ...) is only known to touch at least ceil(topk/ep) of them (each token picks
-- topk distinct experts), so that lower bound is used: implied bandwidth is never overstated.
create or replace macro kernel_experts_touched(tokens, topk, experts, ep, routing) as
experts_touched(
    tokens, topk, experts, experts::double / coalesce(ep, 1),
    case when routing is null or routing in ('balanced', 'uniform') then 'balanced' else routing end
);
