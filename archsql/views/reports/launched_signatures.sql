-- The kernel signature of every kernel a framework version launches (launched_kernels), in
-- the kernel corpus's conventions: the signature of the kernel's anchor (kernel_signatures),
-- and for a merged GEMM (a siblings rule: q/k/v, gate/up, the routed experts' w13) the one
-- GEMM it runs — the members share m (tokens) and k, their n add up.  A fused chain whose
-- anchor has no measured op kind (silu_and_mul, add + RMSNorm) has no signature.
with

kernels as (
    select
        model,
        deployment,
        workload,
        framework,
        version,
        kernel_uid,
        kernel,
        rule,
        members
    from launched_kernels
),

signatures as (
    select *
    from kernel_signatures
),

-- a merged GEMM's n: the sum of its members' n (each member a GEMM of the same m and k)
merged as (
    select
        k.model,
        k.deployment,
        k.workload,
        k.framework,
        k.version,
        k.kernel_uid,
        sum(s.n) as n,
        count(distinct s.k) = 1 and count(*) = len(any_value(k.members)) as same_k
    from kernels as k
    inner join base_fusion_rules as r on r.framework = k.framework and r.version = k.version and r.rule = k.rule
    cross join unnest(k.members) as m(uid)
    inner join signatures as s
        on s.model = k.model and s.deployment = k.deployment and s.workload = k.workload and s.uid = m.uid
    where r.pattern = 'siblings' and s.op_kind in ('gemm', 'grouped_gemm')
    group by k.model, k.deployment, k.workload, k.framework, k.version, k.kernel_uid
)

select
    k.model,
    k.deployment,
    k.workload,
    k.framework,
    k.version,
    k.kernel_uid as uid,
    k.kernel,
    k.rule,
    s.gpu,
    s.phase,
    s.op_kind,
    s.launches,
    s.dtype,
    s.weight_dtype,
    s.kv_dtype,
    s.tp,
    s.ep,
    s.nodes,
    s.m,
    case when g.same_k then g.n else s.n end as n,
    s.k,
    s.batch,
    s.q_len,
    s.kv_len,
    s.heads,
    s.kv_heads,
    s.head_dim,
    s.v_head_dim,
    s.window_size,
    s.tokens,
    s.hidden,
    s.topk,
    s.experts,
    s.routing,
    s.message_bytes,
    s.group_size
from kernels as k
inner join signatures as s
    on s.model = k.model and s.deployment = k.deployment and s.workload = k.workload and s.uid = k.kernel_uid
left join merged as g
    on
        g.model = k.model and g.deployment = k.deployment and g.workload = k.workload
        and g.framework = k.framework and g.version = k.version and g.kernel_uid = k.kernel_uid
