-- Per-device terms of every op of every model in every deployment: the global per-instance
-- terms times copies, divided by the degrees of the groups that split the op's work.
with

terms as (
    select *
    from base_terms
    where quantity in ('flops', 'read_elements', 'write_elements', 'cache_read_elements', 'cache_elements', 'comm_elements')
),

instances as (
    select *
    from base_instances
),

nodes as (
    select
        model,
        uid,
        op,
        role
    from base_nodes
),

-- the nodes each deployment runs in each phase (the base model; MTP nodes where it drafts)
loaded as (
    select
        model,
        deployment,
        phase,
        uid
    from int_deployment_nodes
),

groups as (
    select *
    from int_deployment_groups
),

-- the groups that split each tensor of a node, by scope: 'work' (the op's arithmetic: its
-- output's sharded axes and pending sums), 'out' (its output as stored: sharded axes only — a
-- pending sum is whole on every device), 'in<port>' (an input as the op consumes it: its
-- sharded axes — a pending sum passing through a linear op is read whole) and
-- 'copies' (routed experts spread over their group, which splits every scope of the node)
layout_rows as (
    select
        model,
        phase,
        uid,
        tensor,
        placement,
        "group",
        parts,
        segments
    from base_layouts
),

node_groups as (
    select model, phase, uid, 'work' as scope, "group", max(parts) as parts, any_value(segments) as segments
    from layout_rows
    where tensor = 'out'
    group by model, phase, uid, "group"
    union all
    select model, phase, uid, 'out' as scope, "group", max(parts) as parts, any_value(segments) as segments
    from layout_rows
    where tensor = 'out' and placement = 'S'
    group by model, phase, uid, "group"
    union all
    select model, phase, uid, tensor as scope, "group", max(parts) as parts, any_value(segments) as segments
    from layout_rows
    where tensor = 'copies' or (regexp_full_match(tensor, 'in[0-9]+') and placement = 'S')
    group by model, phase, uid, tensor, "group"
),

-- a group divides a scope once: the group a routed expert's copies are spread over splits
-- every scope of the node, so a scope's own split over it (the (token, expert) pairs each
-- device holds, sharded over the same group) is not counted again
scoped_groups as (
    select n.*
    from node_groups as n
    left join node_groups as c
        on c.model = n.model and c.phase = n.phase and c.uid = n.uid and c.scope = 'copies' and c."group" = n."group"
    where n.scope = 'copies' or c.uid is null
),

-- a group of n devices splits P whole parts so that the fullest device holds ceil(P / n):
-- the effective divisor is P / ceil(P / n) (e.g. 4 KV heads on tp 8: 4, each head replicated;
-- the macro shard_divisor, which also takes the segments of a fused axis)
node_divisors as (
    select
        n.model,
        n.phase,
        n.uid,
        n.scope,
        g.deployment,
        product(shard_divisor(n.parts, n.segments, g.degree)) as divisor
    from scoped_groups as n
    inner join groups as g on g."group" = n."group"
    group by n.model, n.phase, n.uid, n.scope, g.deployment
),

-- cache reads are split like the cached tensor (a latent without a head axis is not split by tp);
-- an op that reads its own state (a recurrent state node, no port 1) is split like itself
cache_sources as (
    select
        e.model,
        e.phase,
        e.dst_uid as uid,
        e.src_uid
    from base_edges as e
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
        t.* exclude (model, phase, uid, quantity, port, coef),  -- the monomial
        t.coef * i.count / coalesce(
            case when t.quantity = 'cache_read_elements' and cs.src_uid is not null then src.divisor else own.divisor end,
            1
        ) / coalesce(cp.divisor, 1) as coef
    from terms as t
    inner join nodes as n on n.model = t.model and n.uid = t.uid
    inner join instances as i on i.model = t.model and i.uid = t.uid
    cross join (select distinct deployment from groups) as d
    inner join loaded as r on r.model = t.model and r.deployment = d.deployment and r.phase = t.phase and r.uid = t.uid
    left join node_divisors as own
        on own.model = t.model and own.phase = t.phase and own.uid = t.uid and own.deployment = d.deployment
        and own.scope = case t.quantity
            when 'flops' then 'work'
            when 'read_elements' then 'in' || t.port
            else 'out'
        end
    left join node_divisors as cp
        on cp.model = t.model and cp.phase = t.phase and cp.uid = t.uid and cp.deployment = d.deployment
        and cp.scope = 'copies'
    left join cache_sources as cs on cs.model = t.model and cs.phase = t.phase and cs.uid = t.uid
    left join node_divisors as src
        on src.model = t.model and src.phase = t.phase and src.uid = cs.src_uid and src.deployment = d.deployment
        and src.scope = 'out'
    where t.quantity <> 'comm_elements'
),

-- the link traffic of collectives and pipeline sends (messages, kinds, nodes crossed):
-- int_device_comm_terms
-- (a pipeline send is no node: it crosses its boundary in every deployment that has one)
comm_terms as (
    select c.*
    from int_device_comm_terms as c
    left join loaded as r on r.model = c.model and r.deployment = c.deployment and r.phase = c.phase and r.uid = c.uid
    left join nodes as n on n.model = c.model and n.uid = c.uid
    where r.uid is not null or n.uid is null
)

select * from op_terms
union all by name
select * from comm_terms
