-- The kernel signature of every kernel a framework version launches (launched_kernels), in
-- the kernel corpus's conventions: the signature of the kernel's anchor (kernel_signatures),
-- and for a merged GEMM (a siblings rule: q/k/v, gate/up, the routed experts' w13) the one
-- GEMM it runs — the members share m (tokens) and k, their n add up.  A group whose rule
-- names a measured op kind (base_fusion_rules.op_kind) is that kernel: 'moe' — a fused-MoE
-- call, from its first grouped GEMM (tokens, hidden = its k, inter = its n × moe_tp, experts,
-- moe_tp, ep) and the MoE component's top_k — and 'mla' — the MLA attention kernel, from its score (batch, q_len, kv_len,
-- heads) and the MLA component's dims (d_kv_lora, d_qk_rope, d_qk_nope, d_v_head).  A fused
-- chain whose anchor has no measured op kind (silu_and_mul, add + RMSNorm) has no signature.
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
        call_uid
    from launched_kernels
),

signatures as (
    select *
    from kernel_signatures
),

rules as (
    select
        framework,
        version,
        rule,
        kernel,
        op_kind
    from base_fusion_rules
),

-- groups measured as one kernel of their rule's op kind
measured_groups as (
    select
        h.model,
        h.deployment,
        h.phase,
        h.framework,
        h.version,
        h.rule,
        r.op_kind,
        h.input_uid,
        h.members
    from fusion_hits as h
    inner join rules as r on r.framework = h.framework and r.version = h.version and r.rule = h.rule
    where h.launched and r.op_kind is not null
),

-- a fused-MoE call: the shapes of its first grouped GEMM (the one reading the group's input)
moe as (
    select
        g.model,
        g.deployment,
        s.workload,
        g.framework,
        g.version,
        g.rule,
        g.members[1] as kernel_uid,
        min(s.tokens) as tokens,
        min(s.k) as hidden,
        min(s.n * coalesce(s.tp, 1)) as inter,
        min(x.value) as topk,
        min(s.experts) as experts,
        min(s.dtype) as dtype,
        min(s.tp) as tp,
        min(s.ep) as ep,
        min(s.launches) as launches
    from measured_groups as g
    inner join int_fusion_graph as e on e.model = g.model and e.phase = g.phase and e.src_uid = g.input_uid
    inner join signatures as s
        on s.model = g.model and s.deployment = g.deployment and s.phase = g.phase and s.uid = e.dst_uid
    -- the routed top-k of the model (a device under expert parallelism holds a share of it)
    left join base_dims as x on x.model = g.model and x.dim = 'top_k'
    where g.op_kind = 'moe' and s.op_kind = 'grouped_gemm' and list_contains(g.members, e.dst_uid)
    group by g.model, g.deployment, s.workload, g.framework, g.version, g.rule, g.members[1]
),

mla_dims as (
    select
        model,
        max(value) filter (where dim = 'd_kv_lora') as kv_lora_rank,
        max(value) filter (where dim = 'd_qk_rope') as rope_dim,
        max(value) filter (where dim = 'd_qk_nope') as head_dim,
        max(value) filter (where dim = 'd_v_head') as v_head_dim
    from base_dims
    group by model
),

-- the launched merged GEMMs (a siblings rule) with their members: read apart from `kernels`
-- (a step read twice is materialized whole — every kernel's member list, 2.5 M rows on the catalog)
merged_kernels as (
    select
        k.model,
        k.deployment,
        k.workload,
        k.framework,
        k.version,
        k.kernel_uid,
        k.members,
        array_length(k.members) as member_count
    from launched_kernels as k
    inner join base_fusion_rules as r on r.framework = k.framework and r.version = k.version and r.rule = k.rule
    where r.pattern = 'siblings' and k.call_uid is null
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
        -- one k (min = max: a distinct count would aggregate the rows a second time)
        coalesce(min(s.k) = max(s.k), false) and count(*) = any_value(k.member_count) as same_k
    from merged_kernels as k
    cross join unnest(k.members) as m(uid)
    inner join signatures as s
        on s.model = k.model and s.deployment = k.deployment and s.workload = k.workload and s.uid = m.uid
    where s.op_kind in ('gemm', 'grouped_gemm')
    group by k.model, k.deployment, k.workload, k.framework, k.version, k.kernel_uid
),

kernel_rows as (
    select
        k.model,
        k.deployment,
        k.workload,
        k.framework,
        k.version,
        k.kernel_uid as uid,
        k.kernel,
        k.rule,
        d.gpu,
        w.phase,
        coalesce(r.op_kind, s.op_kind) as op_kind,
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
        case when r.op_kind = 'mla' then md.head_dim else s.head_dim end as head_dim,
        case when r.op_kind = 'mla' then md.v_head_dim else s.v_head_dim end as v_head_dim,
        s.window_size,
        s.tokens,
        s.hidden,
        null::bigint as inter,
        s.topk,
        s.experts,
        case when r.op_kind = 'mla' then md.kv_lora_rank end as kv_lora_rank,
        case when r.op_kind = 'mla' then md.rope_dim end as rope_dim,
        s.routing,
        s.message_bytes,
        s.group_size
    from kernels as k
    left join rules as r on r.framework = k.framework and r.version = k.version and r.rule = k.rule
    left join signatures as s
        on s.model = k.model and s.deployment = k.deployment and s.workload = k.workload and s.uid = k.kernel_uid
    left join mla_dims as md on md.model = k.model
    inner join base_deployments as d on d.deployment = k.deployment
    inner join base_workloads as w on w.workload = k.workload
    left join merged as g
        on
            g.model = k.model and g.deployment = k.deployment and g.workload = k.workload
            and g.framework = k.framework and g.version = k.version and g.kernel_uid = k.kernel_uid
    where s.uid is not null and k.call_uid is null and r.op_kind is distinct from 'moe'
),

-- a fused-MoE group (a call, or one kernel) measured as one whole-MoE row
call_rows as (
    select
        mo.model,
        mo.deployment,
        mo.workload,
        mo.framework,
        mo.version,
        mo.kernel_uid as uid,
        r.kernel,
        r.rule,
        d.gpu,
        w.phase,
        'moe' as op_kind,
        mo.launches,
        mo.dtype,
        null::varchar as weight_dtype,
        null::varchar as kv_dtype,
        mo.tp,
        mo.ep,
        null::bigint as nodes,
        null::bigint as m,
        null::bigint as n,
        null::bigint as k,
        null::bigint as batch,
        null::bigint as q_len,
        null::bigint as kv_len,
        null::bigint as heads,
        null::bigint as kv_heads,
        null::bigint as head_dim,
        null::bigint as v_head_dim,
        null::bigint as window_size,
        mo.tokens,
        mo.hidden,
        mo.inter,
        mo.topk,
        mo.experts,
        null::bigint as kv_lora_rank,
        null::bigint as rope_dim,
        null::varchar as routing,
        null::bigint as message_bytes,
        null::bigint as group_size
    from moe as mo
    inner join rules as r on r.framework = mo.framework and r.version = mo.version and r.rule = mo.rule
    inner join base_deployments as d on d.deployment = mo.deployment
    inner join base_workloads as w on w.workload = mo.workload
)

select * from kernel_rows
union all by name
select * from call_rows
