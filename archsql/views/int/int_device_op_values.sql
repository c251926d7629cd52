-- Per-device quantities of every op at every workload: the op's terms evaluated (the one
-- place per-device terms meet workloads).
with

workloads as (
    select
        workload,
        phase,
        batch,
        new_tokens,
        context
    from base_workloads
),

terms as (
    select
        model,
        deployment,
        phase,
        uid,
        op,
        role,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        flops,
        hbm_bytes,
        comm_bytes,
        cache_bytes
    from int_device_op_terms
),

term_values as (
    select
        t.model,
        t.deployment,
        w.workload,
        t.phase,
        t.uid,
        t.op,
        t.role,
        t.flops,
        t.hbm_bytes,
        t.comm_bytes,
        t.cache_bytes,
        term_value(t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context) as value
    from terms as t
    inner join workloads as w on w.phase = t.phase
),

evaluated as (
    select
        model,
        deployment,
        workload,
        phase,
        uid,
        any_value(op) as op,
        any_value(role) as role,
        sum(flops * value) as flops,
        sum(hbm_bytes * value) as hbm_bytes,
        sum(comm_bytes * value) as comm_bytes,
        sum(cache_bytes * value) as cache_bytes
    from term_values
    group by model, deployment, workload, phase, uid
)

select
    model,
    deployment,
    workload,
    phase,
    uid,
    op,
    role,
    flops,
    hbm_bytes,
    comm_bytes,
    cache_bytes
from evaluated
