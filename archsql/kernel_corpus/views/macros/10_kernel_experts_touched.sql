-- kernel_experts_touched(tokens, topk, experts, ep, routing): routed experts of one device
-- whose weights a MoE step must read.  The device holds experts/ep experts and receives
-- tokens*topk/ep (token, expert) pairs.  Balanced routing spreads the pairs over its
-- experts: least(experts/ep, pairs).  Any other distribution (power law, ...) is only
-- known to touch at least ceil(topk/ep) of them (each token picks topk distinct experts),
-- so that lower bound is used: implied bandwidth is never overstated.
create or replace macro kernel_experts_touched(tokens, topk, experts, ep, routing) as
case
    when routing is null or routing in ('balanced', 'uniform')
        then least(experts::double / coalesce(ep, 1), ceil(tokens::double * topk / coalesce(ep, 1)))
    else least(experts::double / coalesce(ep, 1), greatest(1, ceil(topk::double / coalesce(ep, 1))))
end;
