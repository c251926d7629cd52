-- The op graph fusion rules match over, per model and phase: every dataflow edge
-- (base_edges) and the edge of every inferred collective into the input port it prepares
-- (base_collectives: an all-reduce of o_proj's partial sums feeds the residual add's port 1),
-- so a rule can name a collective as a chain member.  A collective on a node's output (port
-- -1) has no consumer edge here.
with

edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        port,
        stream
    from base_edges
    where src_uid is not null
),

collectives as (
    select
        model,
        phase,
        uid as src_uid,
        consumer_uid as dst_uid,
        port,
        null::varchar as stream
    from base_collectives
    where port >= 0
)

select
    model,
    phase,
    src_uid,
    dst_uid,
    port,
    stream
from edges
union all
select
    model,
    phase,
    src_uid,
    dst_uid,
    port,
    stream
from collectives
