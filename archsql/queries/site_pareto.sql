-- Decode tokens/s per GPU vs tokens/s per user of every model × deployment × decode workload that fits, Pareto frontier marked.
with
points as (
    select
        s.model,
        s.deployment,
        s.workload,
        s.batch,
        s.context,
        s.gpus,
        s.time_s,
        s.tokens_per_s_per_gpu,
        s.new_tokens / s.time_s as tokens_per_s_per_user
    from step_sol as s
    where s.phase = 'decode' and s.fits and s.time_s > 0
),

dominated as (
    select distinct
        p.model,
        p.deployment,
        p.workload
    from points as p
    inner join points as q
        on
            q.model = p.model
            and dominates(q.tokens_per_s_per_user, q.tokens_per_s_per_gpu, p.tokens_per_s_per_user, p.tokens_per_s_per_gpu)
)

select
    p.model,
    p.deployment,
    p.workload,
    p.batch,
    p.context,
    p.gpus,
    p.time_s,
    p.tokens_per_s_per_gpu,
    p.tokens_per_s_per_user,
    d.model is null as on_frontier
from points as p
left join dominated as d on d.model = p.model and d.deployment = p.deployment and d.workload = p.workload
order by p.model, p.tokens_per_s_per_user, p.deployment, p.workload
