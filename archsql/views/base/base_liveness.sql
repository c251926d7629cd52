-- Which materialized activations are held while each op runs (archsql.evaluator.liveness).
select
    model,
    phase,
    uid,
    live_uid
from liveness
