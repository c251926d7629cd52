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

-- routed tokens: an expert all-to-all's experts and top_k, from the routed expert nodes its
-- consumer feeds (dispatch) or is fed by (combine)
expert_nodes as (
    select
        model,
        phase,
        uid,
        max(experts) as experts,
        max(top_k) as top_k
    from int_routed_experts
    group by model, phase, uid
),

expert_edges as (
    select model, phase, src_uid as consumer_uid, dst_uid as expert_uid from base_edges
    union all
    select model, phase, dst_uid as consumer_uid, src_uid as expert_uid from base_edges
),

routes as (
    select
        c.model,
        c.phase,
        c.uid,
        max(x.experts) as experts,
        max(x.top_k) as top_k
    from collectives as c
    inner join expert_edges as e on e.model = c.model and e.phase = c.phase and e.consumer_uid = c.consumer_uid
    inner join expert_nodes as x on x.model = e.model and x.phase = e.phase and x.uid = e.expert_uid
    where c.kind = 'all_to_all' and c."group" = 'moe_ep'
    group by c.model, c.phase, c.uid
),

-- the expert-parallel ranks holding the same tokens: the members of one tensor-parallel group
-- (tp consecutive devices, ep members every moe_tp of them)
token_holders as (
    select
        deployment,
        least(ep, greatest(1, tp // moe_tp)) as holders
    from int_deployment_degrees
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
-- Routed tokens (an expert all-to-all; M = the device's tokens × top_k pairs) travel once per
-- distinct destination rank (ranks_touched: D of the n ranks), not once per expert, and not
-- to the h ranks already holding the token (D·h/n of them in expectation); the h holders
-- share the sending: M · D · (1 − h/n) / (h · top_k).  With attention TP and experts EP on
-- the same GPUs (h = n) nothing travels.  The combine returns one reduced vector per
-- (token, rank) the same way.
collective_terms as (
    select
        t.model,
        g.deployment,
        t.phase,
        t.uid,
        c.kind as op,
        n.role,
        t.* exclude (model, phase, uid, coef),  -- the monomial
        t.coef * i.count * case
            when r.uid is not null
                then ranks_touched(r.experts, r.top_k, g.degree) * (1 - h.holders / g.degree) / (h.holders * r.top_k)
            when c.kind = 'all_reduce' then 2.0 * (g.degree - 1) / g.degree
            when c.kind = 'all_to_all' then (g.degree - 1.0) / g.degree
            else g.degree - 1.0
        end / coalesce(
            md.divisor, dp.degree * case when c.kind in ('all_gather', 'ring_pass') then g.degree else 1 end
        ) as coef,
        case
            when not g.crosses_nodes then 0.0
            when r.uid is not null then (g.degree - g.members_per_node) / greatest(g.degree - h.holders, 1.0)
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
    left join routes as r on r.model = t.model and r.phase = t.phase and r.uid = t.uid
    left join token_holders as h on h.deployment = g.deployment
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
