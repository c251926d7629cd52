-- kernel_compressed_pairs(s, c, r, k): (query, compressed entry) pairs when s new queries
-- follow c - s cached tokens, the cache folds r tokens per entry and each query sees at
-- most k entries (a top-k selection; k null: all of them):
--     sum over j = c - s + 1 .. c of min(k, floor(j / r))
-- floor(j / r) >= k exactly when j >= k*r, so the sum is the uncapped sum up to k*r plus k
-- for each later position:
--     G(min(c, k*r)) - G(min(c - s, k*r)) + k * max(0, c - max(c - s, k*r)),  G = kernel_floor_div_sum
-- r = 1, k null is the causal triangle window_pairs(s, c, c); r = 1, k = w is window_pairs(s, c, w).
create or replace macro kernel_compressed_pairs(s, c, r, k) as
kernel_floor_div_sum(least(c, coalesce(k, c) * r), r)
- kernel_floor_div_sum(least(c - s, coalesce(k, c) * r), r)
+ coalesce(k, c) * greatest(0, c - greatest(c - s, coalesce(k, c) * r));
