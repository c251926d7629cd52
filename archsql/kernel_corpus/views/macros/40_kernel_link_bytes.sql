-- kernel_link_bytes(...): bytes each rank of a collective must send (and receive) over its
-- scale-up link at least, for ranks inside one node.  Null for other op kinds and for
-- collectives that span nodes (their bound is the NIC).  Derivations: docs/kernel_corpus.md.
--   all_reduce, all_gather,   message_bytes·(group_size - 1)/group_size.  A ring all-reduce
--   reduce_scatter,           sends twice that, an in-switch (NVLS) reduction about that, so
--   all_to_all                the bound holds for every algorithm.
--   moe_dispatch,             a·tokens·hidden·(ep - 1)·(1 - (1 - 1/ep)^topk): each of the
--   moe_combine               rank's tokens goes once to every other rank holding one of its
--                             top-k experts (and its result comes back).  With balanced
--                             routing each pick lands on a rank uniformly, so a given other rank
--                             is missed by all topk picks with probability (1 - 1/ep)^topk
--                             (picks with replacement: distinct experts only hit more ranks).
--                             An expectation: it holds for the many tokens of a timed batch;
--                             null for other routings (a skewed routing may keep tokens local).
--   moe_a2a_prepare           no formula (metadata exchange).
create or replace macro kernel_link_bytes(op_kind, message_bytes, group_size, nodes, tokens, hidden, topk, ep, routing, a_bytes) as
case
    when coalesce(nodes, 1) <> 1 then null
    when op_kind in ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all')
        then message_bytes::double * (group_size - 1) / group_size
    when op_kind in ('moe_dispatch', 'moe_combine') and (routing is null or routing in ('balanced', 'uniform'))
        then a_bytes * tokens::double * hidden * (ep - 1) * (1 - power(1 - 1 / ep::double, topk))
end;
