-- Per-device quantities of every op at every workload: the op's terms evaluated (the one
-- place per-device terms meet workloads).
with

-- ops and workloads get integer keys so that the large sum below groups on two integers (the
-- names are joined back once per result row)
workloads as (
    select
        dense_rank() over (order by workload, phase, batch, new_tokens, context) as workload_key,
        *
    from int_workload_inputs
),

terms as (
    select
        dense_rank() over (order by model, deployment, phase, uid) as op_key,
        *
    from int_device_op_terms
),

ops as (
    select
        op_key,
        any_value(model) as model,
        any_value(deployment) as deployment,
        any_value(phase) as phase,
        any_value(uid) as uid,
        any_value(op) as op,
        any_value(role) as role
    from terms
    group by op_key
),

term_values as (
    select
        t.op_key,
        w.workload_key,
        t.flops,
        t.hbm_bytes,
        t.comm_bytes,
        t.scaleout_bytes,
        t.cache_bytes,
        t.output_bytes,
        term_value(
            t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, w.batch, w.new_tokens, w.context,
            v := w.image_patches
        ) as value
    from terms as t
    inner join workloads as w on w.phase = t.phase
),

evaluated as (
    select
        op_key,
        workload_key,
        sum(flops * value) as flops,
        sum(hbm_bytes * value) as hbm_bytes,
        sum(comm_bytes * value) as comm_bytes,
        sum(scaleout_bytes * value) as scaleout_bytes,
        sum(cache_bytes * value) as cache_bytes,
        sum(output_bytes * value) as output_bytes
    from term_values
    group by op_key, workload_key
)

select
    o.model,
    o.deployment,
    w.workload,
    o.phase,
    o.uid,
    o.op,
    o.role,
    e.flops,
    e.hbm_bytes,
    e.comm_bytes,
    e.scaleout_bytes,
    e.cache_bytes,
    e.output_bytes
from evaluated as e
inner join ops as o on o.op_key = e.op_key
inner join workloads as w on w.workload_key = e.workload_key
