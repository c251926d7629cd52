-- ranks_touched(experts, top_k, ranks): the distinct expert-parallel ranks one token is sent
-- to, when it picks top_k distinct experts of `experts` spread evenly over `ranks` devices
-- (experts / ranks each), in expectation under uniform routing: a given rank is missed when
-- all top_k picks fall among the other experts − experts/ranks, with probability
-- C(experts − experts/ranks, top_k) / C(experts, top_k), so
-- ranks · (1 − C(experts − experts/ranks, top_k) / C(experts, top_k)).
-- A deduplicating all-to-all (DeepEP, pplx) sends a token once per such rank, not once per
-- expert: DeepSeek-V3 (256 experts, top 8) over 8 ranks reaches 5.3 ranks, not 8.
-- The binomials by lgamma (real experts/ranks where they do not divide); fewer than top_k
-- experts outside a rank: every token reaches it.
create or replace macro ranks_touched(experts, top_k, ranks) as
case
    when ranks <= 1 then 1.0
    when experts - experts / ranks < top_k then ranks::double
    else ranks * (1 - exp(
        lgamma(experts - experts / ranks + 1) - lgamma(experts - experts / ranks - top_k + 1)
        - lgamma(experts + 1) + lgamma(experts - top_k + 1)
    ))
end;
