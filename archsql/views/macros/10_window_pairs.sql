-- window_pairs(s, c, w): causal (query, key) pairs when s new queries follow c - s cached
-- tokens and each query sees at most w keys (itself included):
--     sum over j = c - s + 1 .. c of min(j, w)
-- exact in BIGINT; same closed form as archsql.evaluator.factors.window_pairs_int.
--   c <= w (no query reaches the cap):        s*c - s*(s - 1)/2, the plain causal triangle
--   c - s + 1 >= w (every query is capped):   s*w
--   otherwise: queries at j < w see j keys, the c - w + 1 later ones see w:
--     (w*(w + 1) - first*(first - 1))/2 + (c - w)*w, first = c - s + 1
create or replace macro window_pairs(s, c, w) as
case
    when c <= w then s * c - s * (s - 1) // 2
    when c - s + 1 >= w then s * w
    else (w * (w + 1) - (c - s + 1) * (c - s)) // 2 + (c - w) * w
end;
