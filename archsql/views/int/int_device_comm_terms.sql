-- Per-device link traffic of every collective and every pipeline send, in every deployment:
-- the elements one device sends (or receives), and the part of them that crosses nodes.
with

terms as (
    select * exclude (quantity, port)
    from base_terms
    where quantity = 'comm_elements'
),

collectives as (
    select
        model,
        phase,
        uid,
        consumer_uid,
        kind,
        "group"
    from base_collectives
),

nodes as (
    select
        model,
        uid,
        role
    from base_nodes
),

instances as (
    select *
    from base_instances
),

groups as (
    select
        deployment,
        "group",
        degree,
        members_per_node,
        crosses_nodes
    from int_deployment_links
),

-- the message: the communicated tensor as one device holds it (layouts tensor 'message'); a
-- group of n devices over P whole parts leaves the fullest device ceil(P / n) of them
messages as (
    select
        model,
        phase,
        uid,
        "group",
        max(parts) as parts
    from base_layouts
    where tensor = 'message' and placement = 'S'
    group by model, phase, uid, "group"
),

message_divisors as (
    select
        m.model,
        m.phase,
        m.uid,
        g.deployment,
        product(case when m.parts is null then g.degree else m.parts / ceil(m.parts / g.degree) end) as divisor
    from messages as m
    inner join groups as g on g."group" = m."group"
    group by m.model, m.phase, m.uid, g.deployment
),

-- per device, with n the group's degree and M one device's message: a ring all-reduce sends
-- 2(n-1)/n M, an all-to-all (n-1)/n M, an all-gather receives the (n-1) other shards M, a ring
-- pass forwards n-1 blocks M.  A group that crosses nodes sends over the scale-out NIC: every
-- ring step of a ring collective (the slowest link bounds them all), the share of an
-- all-to-all addressed to members on other nodes ((n - members on its node) / (n - 1)).
collective_terms as (
    select
        t.model,
        g.deployment,
        t.phase,
        t.uid,
        c.kind as op,
        n.role,
        t.* exclude (model, phase, uid, coef),  -- the monomial
        t.coef * i.count * case c.kind
            when 'all_reduce' then 2.0 * (g.degree - 1) / g.degree
            when 'all_to_all' then (g.degree - 1.0) / g.degree
            else g.degree - 1.0
        end / coalesce(
            md.divisor, dp.degree * case when c.kind in ('all_gather', 'ring_pass') then g.degree else 1 end
        ) as coef,
        case
            when not g.crosses_nodes then 0.0
            when c.kind = 'all_to_all' then (g.degree - g.members_per_node) / (g.degree - 1.0)
            else 1.0
        end as scaleout_share
    from terms as t
    inner join collectives as c on c.model = t.model and c.phase = t.phase and c.uid = t.uid
    inner join nodes as n on n.model = t.model and n.uid = c.consumer_uid
    inner join instances as i on i.model = t.model and i.uid = t.uid
    inner join groups as g on g."group" = c."group"
    left join groups as dp on dp.deployment = g.deployment and dp."group" = 'dp'
    left join message_divisors as md
        on md.model = t.model and md.phase = t.phase and md.uid = t.uid and md.deployment = g.deployment
),

sends as (
    select *
    from int_pipeline_sends
),

all_comm as (
    select * from collective_terms
    union all by name
    select * from sends
)

select
    model,
    deployment,
    phase,
    uid,
    op,
    role,
    'comm_elements' as quantity,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    coef
from all_comm
where coef <> 0  -- a collective over one device moves nothing: no row
union all
select
    model,
    deployment,
    phase,
    uid,
    op,
    role,
    'scaleout_comm_elements' as quantity,
    e_B,
    e_s,
    e_c,
    factor,
    factor_arg,
    coef * scaleout_share as coef
from all_comm
where scaleout_share > 0
