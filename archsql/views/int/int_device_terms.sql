-- Per-device terms of every op of every model in every deployment: the global per-instance
-- terms times copies, divided by the degrees of the groups that split the op's work.
with

terms as (
    select
        model,
        phase,
        uid,
        quantity,
        e_B,
        e_s,
        e_c,
        factor,
        factor_arg,
        coef
    from base_terms
    where quantity in ('flops', 'read_elements', 'write_elements', 'cache_read_elements', 'cache_elements', 'comm_elements')
),

instances as (
    select
        model,
        uid,
        count
    from base_instances
),

nodes as (
    select
        model,
        uid,
        op,
        role
    from base_nodes
    where in_base_model
),

collective_nodes as (
    select
        model,
        phase,
        uid,
        consumer_uid,
        kind,
        "group"
    from base_collectives
),

groups as (
    select
        deployment,
        "group",
        degree
    from int_deployment_groups
),

-- the groups that split a node's work: its output's sharded axes and pending sums, and the
-- group its copies are spread over
node_groups as (
    select
        model,
        phase,
        uid,
        "group",
        max(parts) as parts
    from base_layouts
    where tensor in ('out', 'copies')
    group by model, phase, uid, "group"
),

-- a group of n devices splits P whole parts so that the fullest device holds ceil(P / n):
-- the effective divisor is P / ceil(P / n) (e.g. 4 KV heads on tp 8: 4, each head replicated)
node_divisors as (
    select
        n.model,
        n.phase,
        n.uid,
        g.deployment,
        product(case when n.parts is null then g.degree else n.parts / ceil(n.parts / g.degree) end) as divisor
    from node_groups as n
    inner join groups as g on g."group" = n."group"
    group by n.model, n.phase, n.uid, g.deployment
),

-- cache reads are split like the cached tensor (a latent without a head axis is not split by tp)
cache_sources as (
    select
        e.model,
        e.phase,
        e.dst_uid as uid,
        e.src_uid
    from edges as e
    where e.port = 1 and e.src_uid is not null
),

op_terms as (
    select
        t.model,
        d.deployment,
        t.phase,
        t.uid,
        n.op,
        n.role,
        t.quantity,
        t.e_B,
        t.e_s,
        t.e_c,
        t.factor,
        t.factor_arg,
        t.coef * i.count / coalesce(
            case when t.quantity = 'cache_read_elements' then src.divisor else own.divisor end, 1
        ) as coef
    from terms as t
    inner join nodes as n on n.model = t.model and n.uid = t.uid
    inner join instances as i on i.model = t.model and i.uid = t.uid
    cross join (select distinct deployment from groups) as d
    left join node_divisors as own
        on own.model = t.model and own.phase = t.phase and own.uid = t.uid and own.deployment = d.deployment
    left join cache_sources as cs on cs.model = t.model and cs.phase = t.phase and cs.uid = t.uid
    left join node_divisors as src
        on src.model = t.model and src.phase = t.phase and src.uid = cs.src_uid and src.deployment = d.deployment
    where t.quantity <> 'comm_elements'
),

-- a collective moves, per device: ring all-reduce 2(n-1)/n of the message, all-gather and
-- all-to-all (n-1)/n; the message is the tensor's share on one data-parallel rank
comm_terms as (
    select
        t.model,
        g.deployment,
        t.phase,
        t.uid,
        c.kind as op,
        n.role,
        t.quantity,
        t.e_B,
        t.e_s,
        t.e_c,
        t.factor,
        t.factor_arg,
        t.coef * i.count
        * (case when c.kind = 'all_reduce' then 2.0 else 1.0 end) * (g.degree - 1) / g.degree
        / coalesce(dp.degree, 1) as coef
    from terms as t
    inner join collective_nodes as c on c.model = t.model and c.phase = t.phase and c.uid = t.uid
    inner join nodes as n on n.model = t.model and n.uid = c.consumer_uid
    inner join instances as i on i.model = t.model and i.uid = t.uid
    inner join groups as g on g."group" = c."group"
    left join groups as dp on dp.deployment = g.deployment and dp."group" = 'dp'
    where t.quantity = 'comm_elements'
)

select
    model,
    deployment,
    phase,
    uid,
    op,
    role,
    quantity,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    coef
from op_terms
union all
select
    model,
    deployment,
    phase,
    uid,
    op,
    role,
    quantity,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    coef
from comm_terms
