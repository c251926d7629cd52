-- Measured kernel time next to its speed of light, per kernel the kernel corpus holds a row for, of every model × deployment × workload and policy (measured_vs_sol).
select
    model,
    deployment,
    workload,
    phase,
    policy,
    coalesce(framework, 'any library') as measured_with,
    uid,
    op_kind,
    launches,
    bound,
    sol_s,
    measured_s,
    measured_over_sol,
    library,
    library_version,
    kernel
from measured_vs_sol
where status = 'measured'
order by model, deployment, workload, policy, measured_with, sol_s desc, uid
