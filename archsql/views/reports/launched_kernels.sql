-- What a framework version launches for a model on a deployment at a workload: one row per
-- launched kernel (kernel_sol grouped by kernel_uid) — its members, FLOPs (the members' sum),
-- HBM bytes (the members' fused bytes: weights and the tensors crossing the kernel's
-- boundary), link bytes, and its speed-of-light time: the largest of the members' compute,
-- memory and link times summed (one kernel overlaps them).  A group of views moving nothing
-- (slices, head splits) launches nothing and has no row.
with

ops as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        phase,
        uid,
        op,
        flops,
        bytes,
        saved_bytes,
        comm_bytes,
        compute_s,
        memory_s,
        comm_s,
        unfused_time_s,
        kernel_uid,
        kernel,
        rule,
        call_uid
    from kernel_sol
),

kernels as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        any_value(phase) as phase,
        kernel_uid,
        coalesce(any_value(kernel) filter (where uid = kernel_uid), any_value(kernel)) as kernel,
        any_value(rule) as rule,
        -- the members (uid, op) in uid order, sorted once: two ordered aggregates sort each
        -- group twice (4.5 of the view's 6.5 s of CPU on the catalog)
        list_sort(list({'uid': uid, 'op': op})) as member_ops,
        count(*) as member_count,
        sum(flops) as flops,
        sum(bytes) as bytes,
        sum(saved_bytes) as saved_bytes,
        sum(comm_bytes) as comm_bytes,
        sum(compute_s) as compute_s,
        sum(memory_s) as memory_s,
        sum(comm_s) as comm_s,
        sum(unfused_time_s) as unfused_time_s,
        min(call_uid) as call_uid
    from ops
    group by model, deployment, workload, framework, version, kernel_uid
    having sum(flops) > 0 or sum(bytes) > 0 or sum(comm_bytes) > 0
)

select
    model,
    deployment,
    workload,
    framework,
    version,
    phase,
    kernel_uid,
    kernel,
    rule,
    rule is not null as fused,
    list_transform(member_ops, lambda m: m.uid) as members,
    list_transform(member_ops, lambda m: m.op) as ops,
    member_count,
    flops,
    bytes,
    saved_bytes,
    comm_bytes,
    compute_s,
    memory_s,
    comm_s,
    greatest(coalesce(compute_s, 0), memory_s, coalesce(comm_s, 0)) as time_s,
    case
        when greatest(coalesce(compute_s, 0), memory_s, coalesce(comm_s, 0)) = 0 then 'none'
        when coalesce(comm_s, 0) >= coalesce(compute_s, 0) and coalesce(comm_s, 0) >= memory_s then 'comm'
        when coalesce(compute_s, 0) >= memory_s then 'compute'
        else 'memory'
    end as bound,
    unfused_time_s,
    call_uid
from kernels
