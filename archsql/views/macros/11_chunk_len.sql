-- chunk_len(c, chunk): under chunked (local) attention with `chunk` positions per chunk,
-- the keys the query at absolute (1-based) position c sees — its own chunk up to itself —
-- and the positions a chunked layer's cache keeps after a step that ends at context c:
--     (c - 1) % chunk + 1        (c itself while c <= chunk; never more than chunk)
-- 0 for c <= 0.  Same as archsql.evaluator.factors.chunk_len_int.
create or replace macro chunk_len(c, chunk) as
case
    when c <= 0 then 0
    else (c - 1) % chunk + 1
end;
