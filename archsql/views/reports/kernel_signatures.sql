-- The kernel signature of every op one device runs in every model × deployment × workload:
-- the op kind and the shape fields the kernel corpus keys measurements by, read from the
-- per-device shapes (int_device_shapes), in the corpus's conventions.
with

kernels as (
    select *
    from int_node_kernels
),

anchors as (
    select * exclude (kernel_uid, anchor)
    from kernels
    where anchor and op_kind is not null
),

members as (
    select
        k.model,
        k.phase,
        k.kernel_uid as uid,
        count(*) as members,
        any_value(k.uid) filter (where o.attention_stage = 'apply') as apply_uid
    from kernels as k
    left join base_op_kernels as o on o.op = k.op
    group by k.model, k.phase, k.kernel_uid
),

routers as (
    select
        model,
        phase,
        instance,
        min(uid) as router_uid
    from kernels
    where op = 'router'
    group by model, phase, instance
),

inputs as (
    select
        model,
        phase,
        dst_uid as uid,
        port,
        min(src_uid) as src_uid
    from base_edges
    where src_uid is not null and port in (0, 1)
    group by model, phase, dst_uid, port
),

-- a collective's message is the tensor it reduces: the producer of its consumer's input, or the
-- consumer's own output for a collective on it (port -1: a vocab-parallel embedding's sum)
collectives as (
    select
        c.model,
        c.phase,
        c.uid,
        c."group",
        case when c.port = -1 then c.consumer_uid else e.src_uid end as src_uid
    from base_collectives as c
    left join inputs as e on e.model = c.model and e.phase = c.phase and e.uid = c.consumer_uid and e.port = c.port
    where c.port = -1 or e.src_uid is not null
),

-- the nodes whose shapes make each anchor's signature: itself, its input (a tied head's k),
-- its keys and its apply (attention), its component's router (experts), the tensor a
-- collective reduces
lookups as (
    select model, phase, uid as anchor, 'self' as part, uid as target from anchors
    union all
    select a.model, a.phase, a.uid as anchor, 'input' as part, e.src_uid as target
    from anchors as a
    inner join inputs as e on e.model = a.model and e.phase = a.phase and e.uid = a.uid and e.port = 0
    union all
    select a.model, a.phase, a.uid as anchor, 'key' as part, e.src_uid as target
    from anchors as a
    inner join inputs as e on e.model = a.model and e.phase = a.phase and e.uid = a.uid and e.port = 1
    union all
    select a.model, a.phase, a.uid as anchor, 'apply' as part, m.apply_uid as target
    from anchors as a
    inner join members as m on m.model = a.model and m.phase = a.phase and m.uid = a.uid
    where m.apply_uid is not null
    union all
    select a.model, a.phase, a.uid as anchor, 'router' as part, r.router_uid as target
    from anchors as a
    inner join routers as r on r.model = a.model and r.phase = a.phase and r.instance = a.instance
    union all
    select c.model, c.phase, c.uid as anchor, 'message' as part, c.src_uid as target
    from collectives as c
),

-- those shapes on one device, as lists in axis order
anchor_shapes as (
    select
        l.model,
        s.deployment,
        s.workload,
        l.phase,
        l.anchor as uid,
        list(s.device_size order by s.axis) filter (where l.part = 'self' and s.tensor = 'out') as out_,
        list(s.device_size order by s.axis) filter (where l.part = 'self' and s.tensor = 'weight') as weight_,
        list(s.device_size order by s.axis) filter (where l.part = 'input' and s.tensor = 'out') as input_,
        list(s.device_size order by s.axis) filter (where l.part = 'key' and s.tensor = 'out') as key_,
        list(s.device_size order by s.axis) filter (where l.part = 'apply' and s.tensor = 'out') as apply_,
        list(s.device_size order by s.axis) filter (where l.part = 'router' and s.tensor = 'out') as router_,
        list(s.device_size order by s.axis) filter (where l.part = 'message' and s.tensor = 'out') as message_
    from lookups as l
    inner join int_device_shapes as s on s.model = l.model and s.phase = l.phase and s.uid = l.target
    where s.tensor in ('out', 'weight')
    group by l.model, s.deployment, s.workload, l.phase, l.anchor
),

workloads as (
    select
        workload,
        phase
    from base_workloads
),

deployments as (
    select
        deployment,
        gpu,
        weight_dtype,
        act_dtype,
        kv_dtype
    from base_deployments as d
    where not exists (select 1 from deployment_checks as x where x.deployment = d.deployment)
),

groups as (
    select *
    from int_deployment_groups
),

-- members of a group per node: a group of degree d spans ceil(d / members) nodes
links as (
    select
        deployment,
        "group",
        members_per_node
    from int_deployment_links
),

dtypes as (
    select
        dtype,
        bytes
    from base_dtypes
),

instances as (
    select *
    from base_instances
),

joined as (
    select
        a.model,
        d.deployment,
        d.gpu,
        w.workload,
        a.phase,
        a.uid,
        a.op,
        a.role,
        a.op_kind,
        m.members,
        i.count,
        a.window_size,
        d.weight_dtype,
        d.act_dtype,
        d.kv_dtype,
        att.degree as attention_degree,
        ep.degree as ep_degree,
        mtp.degree as moe_tp_degree,
        cg.degree as collective_degree,
        (cg.degree + cl.members_per_node - 1) // cl.members_per_node as collective_nodes,
        act.bytes as act_bytes,
        sh.out_,
        sh.weight_,
        sh.input_,
        sh.key_,
        sh.apply_,
        sh.router_,
        sh.message_
    from anchors as a
    inner join workloads as w on w.phase = a.phase
    cross join deployments as d
    inner join members as m on m.model = a.model and m.phase = a.phase and m.uid = a.uid
    inner join instances as i on i.model = a.model and i.uid = a.uid
    inner join dtypes as act on act.dtype = d.act_dtype
    left join groups as att on att.deployment = d.deployment and att."group" = 'attention'
    left join groups as ep on ep.deployment = d.deployment and ep."group" = 'moe_ep'
    left join groups as mtp on mtp.deployment = d.deployment and mtp."group" = 'moe_tp'
    left join anchor_shapes as sh
        on sh.model = a.model and sh.deployment = d.deployment and sh.workload = w.workload and sh.uid = a.uid
    left join collectives as c on c.model = a.model and c.phase = a.phase and c.uid = a.uid
    left join groups as cg on cg.deployment = d.deployment and cg."group" = c."group"
    left join links as cl on cl.deployment = d.deployment and cl."group" = c."group"
)

select
    model,
    deployment,
    gpu,
    workload,
    phase,
    uid,
    op,
    role,
    op_kind,
    members,
    -- launches per step: one per copy; routed experts launch once per layer for all experts
    case when op_kind = 'grouped_gemm' then count // router_[array_length(router_)] else count end as launches,
    case
        when op_kind in ('gemm', 'grouped_gemm') then weight_dtype
        else act_dtype
    end as dtype,
    case when op_kind in ('gemm', 'grouped_gemm') then weight_dtype end as weight_dtype,
    case when op_kind in ('attention', 'encoder_attention') then kv_dtype end as kv_dtype,
    case
        when op_kind in ('attention', 'encoder_attention') then attention_degree
        when op_kind = 'grouped_gemm' then moe_tp_degree
    end as tp,
    case when op_kind = 'grouped_gemm' then ep_degree end as ep,
    case when op_kind = 'all_reduce' then collective_nodes end as nodes,
    -- gemm: y[m, n] = x[m, k] · W[n, k]ᵀ; a tied head without its own weight reads its input
    case when op_kind = 'gemm' then list_product(out_[1:array_length(out_) - 1])::bigint end as m,
    case
        when op_kind = 'gemm' then coalesce(weight_[1], out_[array_length(out_)])
        when op_kind = 'grouped_gemm' then weight_[array_length(weight_) - 1]
    end as n,
    case
        when op_kind = 'gemm' then coalesce(weight_[2], input_[array_length(input_)])
        when op_kind = 'grouped_gemm' then weight_[array_length(weight_)]
    end as k,
    -- attention: scores [B, heads, s, c], keys [..., kv_heads, head_dim]
    case when op_kind in ('attention', 'encoder_attention') then out_[1] end as batch,
    case when op_kind in ('attention', 'encoder_attention') then out_[3] end as q_len,
    case when op_kind in ('attention', 'encoder_attention') then out_[4] end as kv_len,
    case when op_kind in ('attention', 'encoder_attention') then out_[2] end as heads,
    case when op_kind in ('attention', 'encoder_attention') then key_[array_length(key_) - 1] end as kv_heads,
    case when op_kind in ('attention', 'encoder_attention') then key_[array_length(key_)] end as head_dim,
    case
        when op_kind in ('attention', 'encoder_attention') then nullif(apply_[array_length(apply_)], key_[array_length(key_)])
    end as v_head_dim,
    case when op_kind = 'attention' then window_size end as window_size,
    -- grouped_gemm: out [..., topk, n]; rmsnorm: out [..., hidden]
    case
        when op_kind = 'grouped_gemm' then list_product(out_[1:array_length(out_) - 2])::bigint
        when op_kind = 'rmsnorm' then list_product(out_[1:array_length(out_) - 1])::bigint
    end as tokens,
    case when op_kind = 'rmsnorm' then out_[array_length(out_)] end as hidden,
    case when op_kind = 'grouped_gemm' then out_[array_length(out_) - 1] end as topk,
    case when op_kind = 'grouped_gemm' then router_[array_length(router_)] end as experts,
    case when op_kind = 'grouped_gemm' then 'balanced' end as routing,
    case when op_kind = 'all_reduce' then (list_product(message_) * act_bytes)::bigint end as message_bytes,
    case when op_kind = 'all_reduce' then collective_degree end as group_size
from joined
-- a collective over one device does not run, nor a kernel without elements (a vision
-- tower at a workload without images)
where coalesce(collective_degree, 2) > 1 and coalesce(list_product(coalesce(out_, message_)), 1) > 0
