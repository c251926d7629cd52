-- Roofline points: per op kind of every step, FLOPs, bytes, arithmetic intensity and attained FLOP/s against the op's peak.
select
    o.model,
    o.deployment,
    o.workload,
    o.phase,
    o.op,
    o.bound,
    sum(o.flops) as flops,
    sum(o.bytes) as bytes,
    sum(o.time_s) as time_s,
    sum(o.flops) / nullif(sum(o.bytes), 0) as arithmetic_intensity,
    sum(o.flops) / nullif(sum(o.time_s), 0) as flops_per_s,
    max(o.peak_flops_per_s) as peak_flops_per_s
from op_sol as o
where o.flops > 0 and o.bytes > 0 and o.time_s > 0
group by o.model, o.deployment, o.workload, o.phase, o.op, o.bound
order by o.model, o.deployment, o.workload, o.op, o.bound
