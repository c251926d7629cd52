-- Every kernel one device runs in every model × deployment × workload next to the measured
-- kernel of the same workload signature (kernel_signatures joined with the corpus on the
-- op kind's signature fields, exactly), under each policy: 'framework' — for every library
-- in the corpus on the deployment's GPU, that library's own newest version with a row for
-- the signature (then its fastest row) — and 'envelope' — the fastest correct row of any
-- library.  A kernel without a measurement keeps its speed-of-light time and says why.
with

sol as (
    select
        model,
        deployment,
        workload,
        phase,
        uid,
        op,
        role,
        compute_s,
        memory_s,
        comm_s,
        time_s
    from op_sol
),

node_kernels as (
    select
        model,
        phase,
        uid,
        kernel_uid
    from int_node_kernels
),

-- a kernel's SOL is the sum of its member ops (a flash-attention kernel: score, softmax, apply)
kernel_sol as not materialized (
    select
        s.model,
        s.deployment,
        s.workload,
        s.phase,
        coalesce(k.kernel_uid, s.uid) as uid,
        any_value(s.op) filter (where s.uid = coalesce(k.kernel_uid, s.uid)) as op,
        any_value(s.role) filter (where s.uid = coalesce(k.kernel_uid, s.uid)) as role,
        count(*) as members,
        sum(s.compute_s) as compute_s,
        sum(s.memory_s) as memory_s,
        sum(s.comm_s) as comm_s,
        sum(s.time_s) as sol_s
    from sol as s
    left join node_kernels as k on k.model = s.model and k.phase = s.phase and k.uid = s.uid
    group by s.model, s.deployment, s.workload, s.phase, coalesce(k.kernel_uid, s.uid)
),

signatures as not materialized (
    select * exclude (op, role, members)
    from kernel_signatures
),

-- per op kind, the fields a measurement must agree on (registry.OpKind.match)
op_kinds as (
    select
        op_kind,
        signature
    from base_kernel_op_kinds
),

-- each op's values of its kind's signature fields, in the registry's order: the join key
-- (read by name from the row as JSON, so no view spells the field list)
op_keys as (
    select
        g.model,
        g.deployment,
        g.workload,
        g.uid,
        g.gpu,
        g.op_kind,
        list_transform(o.signature, lambda f: json_extract_string(to_json(g), f)) as key
    from signatures as g
    inner join op_kinds as o on o.op_kind = g.op_kind
),

-- the measurements with their join keys, in the signatures' conventions
measured_keys as (
    select *
    from int_kernel_measured_keys
),

-- every measurement whose signature equals an op's, exactly
candidates as (
    select
        k.model,
        k.deployment,
        k.workload,
        k.uid,
        c.source_hash || ':' || c.source_row || ':' || c.op_kind as measurement_id,
        c.source,
        c.library,
        c.library_version,
        version_order(c.library_version) as version_order,
        c.kernel,
        c.latency_us
    from op_keys as k
    inner join measured_keys as c
        on c.gpu = k.gpu and c.op_kind = k.op_kind and c.key is not distinct from k.key
),

-- framework policy: per library, its newest version with a row, then the fastest row
-- envelope policy: the fastest row of any library
ranked as (
    select
        model,
        deployment,
        workload,
        uid,
        'framework' as policy,
        library as framework,
        measurement_id,
        source,
        library,
        library_version,
        kernel,
        latency_us,
        count(*) over (partition by model, deployment, workload, uid, library) as candidates,
        row_number() over (
            partition by model, deployment, workload, uid, library
            order by version_order desc, latency_us, measurement_id
        ) as choice
    from candidates
    union all
    select
        model,
        deployment,
        workload,
        uid,
        'envelope' as policy,
        null as framework,
        measurement_id,
        source,
        library,
        library_version,
        kernel,
        latency_us,
        count(*) over (partition by model, deployment, workload, uid) as candidates,
        row_number() over (partition by model, deployment, workload, uid order by latency_us, measurement_id) as choice
    from candidates
),

chosen as (
    select
        model,
        deployment,
        workload,
        uid,
        policy,
        framework,
        measurement_id,
        source,
        library,
        library_version,
        kernel,
        latency_us,
        candidates
    from ranked
    where choice = 1
),

deployments as (
    select
        deployment,
        gpu
    from base_deployments
),

-- the policies a deployment's GPU offers: each library with rows for it, and the envelope
policies as (
    select distinct
        gpu,
        'framework' as policy,
        library as framework
    from base_kernel_corpus
    where library is not null
    union all
    select
        gpu,
        'envelope' as policy,
        null as framework
    from deployments
),

instances as (
    select *
    from base_instances
),

joined as (
    select
        s.model,
        s.deployment,
        d.gpu,
        s.workload,
        s.phase,
        p.policy,
        p.framework,
        s.uid,
        s.op,
        s.role,
        g.op_kind,
        s.members,
        coalesce(g.launches, i.count) as launches,
        g.dtype,
        g.kv_dtype,
        g.m,
        g.n,
        g.k,
        g.batch,
        g.q_len,
        g.kv_len,
        g.heads,
        g.kv_heads,
        g.head_dim,
        g.v_head_dim,
        g.window_size,
        g.tokens,
        g.hidden,
        g.topk,
        g.experts,
        g.ep,
        g.message_bytes,
        g.group_size,
        s.sol_s,
        case
            when s.sol_s = 0 then 'none'
            when s.comm_s >= s.compute_s and s.comm_s >= s.memory_s then 'comm'
            when s.compute_s >= s.memory_s then 'compute'
            else 'memory'
        end as bound,
        c.latency_us,
        c.latency_us * 1e-6 * coalesce(g.launches, i.count) as measured_s,
        c.measurement_id,
        c.source,
        c.library,
        c.library_version,
        c.kernel,
        coalesce(c.candidates, 0) as candidates
    from kernel_sol as s
    inner join deployments as d on d.deployment = s.deployment
    inner join (select distinct gpu, policy, framework from policies) as p on p.gpu = d.gpu
    left join signatures as g
        on g.model = s.model and g.deployment = s.deployment and g.workload = s.workload and g.uid = s.uid
    left join instances as i on i.model = s.model and i.uid = s.uid
    left join chosen as c
        on
            c.model = s.model
            and c.deployment = s.deployment
            and c.workload = s.workload
            and c.uid = s.uid
            and c.policy = p.policy
            and c.framework is not distinct from p.framework
)

select
    model,
    deployment,
    gpu,
    workload,
    phase,
    policy,
    framework,
    uid,
    op,
    role,
    op_kind,
    members,
    launches,
    dtype,
    kv_dtype,
    m,
    n,
    k,
    batch,
    q_len,
    kv_len,
    heads,
    kv_heads,
    head_dim,
    v_head_dim,
    window_size,
    tokens,
    hidden,
    topk,
    experts,
    ep,
    message_bytes,
    group_size,
    sol_s,
    bound,
    measured_s,
    coalesce(measured_s, sol_s) as time_s,
    measured_s / nullif(sol_s, 0) as measured_over_sol,
    measured_s is not null as matched,
    case
        when measured_s is not null then 'measured'
        when sol_s = 0 then 'no work'
        when op_kind is null then 'no kernel signature'
        else 'no measurement'
    end as status,
    candidates,
    latency_us,
    measurement_id,
    source,
    library,
    library_version,
    kernel
from joined
