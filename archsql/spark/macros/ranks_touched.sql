-- The Spark body of archsql/views/macros/16_ranks_touched.sql (read that file for what it
-- means), in the same dialect: Spark SQL has no lgamma, so the ratio of binomials
--     C(experts − experts/ranks, top_k) / C(experts, top_k)
-- is the product over i = 0 .. top_k − 1 of (experts − experts/ranks − i) / (experts − i),
-- the same quantity (Γ(a + 1) / Γ(a − k + 1) = a·(a − 1)···(a − k + 1) for real a), written
-- with Spark's aggregate and sequence.  tests/test_spark.py checks it against the DuckDB macro.
create or replace macro ranks_touched(experts, top_k, ranks) as
case
    when ranks <= 1 then 1.0
    when experts - experts / ranks < top_k then ranks::double
    else ranks * (1 - aggregate(
        sequence(0, top_k::integer - 1),
        1::double,
        lambda acc, i: acc * (experts - experts / ranks - i) / (experts - i)
    ))
end
