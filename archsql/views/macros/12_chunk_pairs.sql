-- chunk_pairs(s, c, chunk): causal (query, key) pairs when s new queries follow c - s
-- cached tokens under chunked attention (`chunk` positions per chunk; a query sees the keys
-- of its own chunk up to itself):
--     sum over j = c - s + 1 .. c of ((j - 1) % chunk + 1)  =  F(c) - F(c - s),
--     F(n) = (n // chunk) * chunk * (chunk + 1) / 2 + r * (r + 1) / 2,  r = n % chunk
-- (n // chunk full chunks, then the r queries of the open chunk).  Exact in BIGINT; same
-- closed form as archsql.evaluator.factors.chunk_pairs_int.
create or replace macro chunk_pairs(s, c, chunk) as
(c // chunk) * chunk * (chunk + 1) // 2 + (c % chunk) * (c % chunk + 1) // 2
- ((c - s) // chunk) * chunk * (chunk + 1) // 2 - ((c - s) % chunk) * ((c - s) % chunk + 1) // 2;
