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
    select
        model,
        deployment,
        gpu,
        workload,
        phase,
        uid,
        op_kind,
        launches,
        dtype,
        weight_dtype,
        kv_dtype,
        tp,
        ep,
        nodes,
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
        routing,
        message_bytes,
        group_size
    from kernel_signatures
),

-- per op kind, which fields its signature holds
op_kinds as (
    select
        op_kind,
        list_contains(signature, 'phase') as has_phase,
        list_contains(signature, 'dtype') as has_dtype,
        list_contains(signature, 'weight_dtype') as has_weight_dtype,
        list_contains(signature, 'kv_dtype') as has_kv_dtype,
        list_contains(signature, 'tp') as has_tp,
        list_contains(signature, 'ep') as has_ep,
        list_contains(signature, 'nodes') as has_nodes,
        list_contains(signature, 'group_size') as has_group_size,
        list_contains(signature, 'm') as has_m,
        list_contains(signature, 'n') as has_n,
        list_contains(signature, 'k') as has_k,
        list_contains(signature, 'batch') as has_batch,
        list_contains(signature, 'q_len') as has_q_len,
        list_contains(signature, 'kv_len') as has_kv_len,
        list_contains(signature, 'heads') as has_heads,
        list_contains(signature, 'kv_heads') as has_kv_heads,
        list_contains(signature, 'head_dim') as has_head_dim,
        list_contains(signature, 'v_head_dim') as has_v_head_dim,
        list_contains(signature, 'window_size') as has_window_size,
        list_contains(signature, 'tokens') as has_tokens,
        list_contains(signature, 'hidden') as has_hidden,
        list_contains(signature, 'topk') as has_topk,
        list_contains(signature, 'experts') as has_experts,
        list_contains(signature, 'routing') as has_routing,
        list_contains(signature, 'message_bytes') as has_message_bytes
    from base_kernel_op_kinds
),

-- the signature fields of each op's kind (others null): the join key
op_keys as (
    select
        g.model,
        g.deployment,
        g.workload,
        g.uid,
        g.gpu,
        g.op_kind,
        case when o.has_phase then g.phase end as phase,
        case when o.has_dtype then g.dtype end as dtype,
        case when o.has_weight_dtype then g.weight_dtype end as weight_dtype,
        case when o.has_kv_dtype then g.kv_dtype end as kv_dtype,
        case when o.has_tp then g.tp end as tp,
        case when o.has_ep then g.ep end as ep,
        case when o.has_nodes then g.nodes end as nodes,
        case when o.has_group_size then g.group_size end as group_size,
        case when o.has_m then g.m end as m,
        case when o.has_n then g.n end as n,
        case when o.has_k then g.k end as k,
        case when o.has_batch then g.batch end as batch,
        case when o.has_q_len then g.q_len end as q_len,
        case when o.has_kv_len then g.kv_len end as kv_len,
        case when o.has_heads then g.heads end as heads,
        case when o.has_kv_heads then g.kv_heads end as kv_heads,
        case when o.has_head_dim then g.head_dim end as head_dim,
        case when o.has_v_head_dim then g.v_head_dim end as v_head_dim,
        case when o.has_window_size then g.window_size end as window_size,
        case when o.has_tokens then g.tokens end as tokens,
        case when o.has_hidden then g.hidden end as hidden,
        case when o.has_topk then g.topk end as topk,
        case when o.has_experts then g.experts end as experts,
        case when o.has_routing then g.routing end as routing,
        case when o.has_message_bytes then g.message_bytes end as message_bytes
    from signatures as g
    inner join op_kinds as o on o.op_kind = g.op_kind
),

corpus as (
    select
        source,
        source_hash,
        source_row,
        op_kind,
        phase,
        gpu,
        library,
        library_version,
        kernel,
        dtype,
        weight_dtype,
        kv_dtype,
        tp,
        ep,
        nodes,
        group_size,
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
        routing,
        message_bytes,
        latency_us,
        check_status
    from base_kernel_corpus
    where check_status is distinct from 'failed'
),

-- the same key from every measurement, in the signatures' conventions: a weight or KV dtype
-- not stated is the compute dtype, an unstated tp / ep / node count is 1, a value head as
-- wide as the key head and a window of 0 are not stated
measured_keys as (
    select
        c.source_hash,
        c.source_row,
        c.source,
        c.gpu,
        c.op_kind,
        c.library,
        c.library_version,
        c.kernel,
        c.latency_us,
        case when o.has_phase then c.phase end as phase,
        case when o.has_dtype then c.dtype end as dtype,
        case when o.has_weight_dtype then coalesce(c.weight_dtype, c.dtype) end
            as weight_dtype,
        case when o.has_kv_dtype then coalesce(c.kv_dtype, c.dtype) end as kv_dtype,
        case when o.has_tp then coalesce(c.tp, 1) end as tp,
        case when o.has_ep then coalesce(c.ep, 1) end as ep,
        case when o.has_nodes then coalesce(c.nodes, 1) end as nodes,
        case when o.has_group_size then c.group_size end as group_size,
        case when o.has_m then c.m end as m,
        case when o.has_n then c.n end as n,
        case when o.has_k then c.k end as k,
        case when o.has_batch then c.batch end as batch,
        case when o.has_q_len then c.q_len end as q_len,
        case when o.has_kv_len then c.kv_len end as kv_len,
        case when o.has_heads then c.heads end as heads,
        case when o.has_kv_heads then c.kv_heads end as kv_heads,
        case when o.has_head_dim then c.head_dim end as head_dim,
        case when o.has_v_head_dim then nullif(c.v_head_dim, c.head_dim) end as v_head_dim,
        case when o.has_window_size then nullif(c.window_size, 0) end as window_size,
        case when o.has_tokens then c.tokens end as tokens,
        case when o.has_hidden then c.hidden end as hidden,
        case when o.has_topk then c.topk end as topk,
        case when o.has_experts then c.experts end as experts,
        case when o.has_routing then c.routing end as routing,
        case when o.has_message_bytes then c.message_bytes end as message_bytes
    from corpus as c
    inner join op_kinds as o on o.op_kind = c.op_kind
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
        on
            c.gpu = k.gpu
            and c.op_kind = k.op_kind
            and c.phase is not distinct from k.phase
            and c.dtype is not distinct from k.dtype
            and c.weight_dtype is not distinct from k.weight_dtype
            and c.kv_dtype is not distinct from k.kv_dtype
            and c.tp is not distinct from k.tp
            and c.ep is not distinct from k.ep
            and c.nodes is not distinct from k.nodes
            and c.group_size is not distinct from k.group_size
            and c.m is not distinct from k.m
            and c.n is not distinct from k.n
            and c.k is not distinct from k.k
            and c.batch is not distinct from k.batch
            and c.q_len is not distinct from k.q_len
            and c.kv_len is not distinct from k.kv_len
            and c.heads is not distinct from k.heads
            and c.kv_heads is not distinct from k.kv_heads
            and c.head_dim is not distinct from k.head_dim
            and c.v_head_dim is not distinct from k.v_head_dim
            and c.window_size is not distinct from k.window_size
            and c.tokens is not distinct from k.tokens
            and c.hidden is not distinct from k.hidden
            and c.topk is not distinct from k.topk
            and c.experts is not distinct from k.experts
            and c.routing is not distinct from k.routing
            and c.message_bytes is not distinct from k.message_bytes
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
    select
        model,
        uid,
        count
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
