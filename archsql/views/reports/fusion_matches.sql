-- Where each framework version's fusion rules match each model's op graph, per phase: one row
-- per matched group — a chain (producer → consumer on the rule's port) or a set of siblings
-- (nodes of one op and role reading the same input) — with its members in graph order.  The
-- structure only: conditions that depend on a deployment (tp_min, flag) are listed with the
-- rule, not yet applied.
with

rules as (
    select *
    from base_fusion_rules
),

nodes as (
    select
        model,
        uid,
        op,
        role
    from base_nodes
),

edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        port
    from base_edges
    where src_uid is not null
),

chains as (
    select
        r.framework,
        r.version,
        r.rule,
        r.kernel,
        e.model,
        e.phase,
        'chain' as pattern,
        e.src_uid as input_uid,
        [e.src_uid, e.dst_uid] as members
    from edges as e
    inner join nodes as a on a.model = e.model and a.uid = e.src_uid
    inner join nodes as b on b.model = e.model and b.uid = e.dst_uid
    inner join rules as r
        on r.pattern = 'chain'
        and a.op = r.first_op and (r.first_role is null or a.role = r.first_role)
        and b.op = r.second_op and (r.second_role is null or b.role = r.second_role)
        and e.port = r.port
),

siblings as (
    select
        r.framework,
        r.version,
        r.rule,
        r.kernel,
        e.model,
        e.phase,
        'siblings' as pattern,
        e.src_uid as input_uid,
        list(e.dst_uid order by e.dst_uid) as members
    from edges as e
    inner join nodes as n on n.model = e.model and n.uid = e.dst_uid
    inner join rules as r
        on r.pattern = 'siblings'
        and n.op = r.first_op and (r.first_role is null or n.role = r.first_role)
        and e.port = r.port
    group by r.framework, r.version, r.rule, r.kernel, e.model, e.phase, e.src_uid
    having count(distinct e.dst_uid) >= 2
),

matches as (
    select * from chains
    union all
    select * from siblings
)

select
    m.model,
    m.phase,
    m.framework,
    m.version,
    m.rule,
    m.pattern,
    m.kernel,
    m.input_uid,
    m.members,
    r.tp_min,
    r.flag
from matches as m
inner join rules as r on r.framework = m.framework and r.version = m.version and r.rule = m.rule
