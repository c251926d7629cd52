-- Points of each saved sweep (archsql sweep MODEL --save NAME) that fit, tokens/s per GPU vs per user, its Pareto frontier marked and each point's layout; stale when the model was built again after the sweep was saved.
with
points as (
    select
        p.model,
        p.sweep,
        p.layout,
        p.deployment,
        p.gpu,
        p.gpus,
        p.batch,
        p.context,
        p.ttft_s,
        p.tpot_s,
        p.tokens_per_s_per_gpu,
        p.tokens_per_s_per_user
    from sweep_points as p
    where p.fits and p.layout_problems is null and p.tokens_per_s_per_user is not null
),

dominated as (
    select distinct
        p.model,
        p.sweep,
        p.deployment,
        p.batch,
        p.context
    from points as p
    inner join points as q
        on
            q.model = p.model
            and q.sweep = p.sweep
            and dominates(q.tokens_per_s_per_user, q.tokens_per_s_per_gpu, p.tokens_per_s_per_user, p.tokens_per_s_per_gpu)
),

saved as (
    select
        s.model,
        s.sweep,
        s.saved_at_utc,
        s.grid,
        exists (
            select 1 from store_meta as m
            where list_contains(m.models, s.model) and m.built_at_utc > s.saved_at_utc
        ) as stale
    from sweeps as s
)

select
    p.*,
    d.model is null as on_frontier,
    strftime(s.saved_at_utc, '%Y-%m-%d %H:%M:%S') as saved_at_utc,
    s.grid,
    s.stale
from points as p
inner join saved as s on s.model = p.model and s.sweep = p.sweep
left join dominated as d
    on d.model = p.model and d.sweep = p.sweep and d.deployment = p.deployment and d.batch = p.batch and d.context = p.context
order by p.model, p.sweep, p.tokens_per_s_per_user, p.layout, p.batch, p.context
