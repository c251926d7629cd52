-- Where each framework version's fusion rules match each model's op graph, per phase: one row
-- per matched group — a chain (each node read by the next on the rule's port), a set of
-- siblings (nodes of one op and role reading the same input), a region (a node and what it
-- feeds inside its component instance, up to an end node) or a single node (a rule naming the
-- kernel it launches) — with its members (a chain in chain order, siblings sorted).
-- Structure only: whether a deployment meets the rule's conditions is fusion_hits'.
with recursive

rules as (
    select
        framework,
        version,
        rule,
        priority,
        pattern,
        kernel,
        steps,
        tp_min,
        flag
    from base_fusion_rules
),

-- every node of a phase with the op it runs in that phase (a decode variant's op in decode)
node_phases as (
    select distinct
        model,
        phase,
        uid
    from base_shapes
    union
    select
        model,
        phase,
        uid
    from base_collectives
),

nodes as (
    select
        p.model,
        p.phase,
        p.uid,
        case when p.phase = 'decode' then coalesce(n.decode_op, n.op) else n.op end as op,
        n.role
    from node_phases as p
    inner join base_nodes as n on n.model = p.model and n.uid = p.uid
),

edges as (
    select
        model,
        phase,
        src_uid,
        dst_uid,
        port
    from int_fusion_graph
),

-- a chain walked from every node matching its first step, one step at a time
walk (framework, version, rule, model, phase, step, last_uid, members) as (
    select
        r.framework,
        r.version,
        r.rule,
        n.model,
        n.phase,
        1 as step,
        n.uid as last_uid,
        [n.uid] as members
    from rules as r
    inner join nodes as n
        on list_contains(r.steps[1].ops, n.op) and (r.steps[1].roles is null or list_contains(r.steps[1].roles, n.role))
    where r.pattern = 'chain'
    union all
    select
        w.framework,
        w.version,
        w.rule,
        w.model,
        w.phase,
        w.step + 1 as step,
        e.dst_uid as last_uid,
        list_append(w.members, e.dst_uid) as members
    from walk as w
    inner join rules as r on r.framework = w.framework and r.version = w.version and r.rule = w.rule
    inner join edges as e
        on e.model = w.model and e.phase = w.phase and e.src_uid = w.last_uid and e.port = r.steps[w.step + 1].port
    inner join nodes as n
        on
            n.model = e.model and n.phase = e.phase and n.uid = e.dst_uid
            and list_contains(r.steps[w.step + 1].ops, n.op)
            and (r.steps[w.step + 1].roles is null or list_contains(r.steps[w.step + 1].roles, n.role))
    where w.step < array_length(r.steps)
),

chains as (
    select
        w.framework,
        w.version,
        w.rule,
        w.model,
        w.phase,
        w.members[1] as input_uid,
        w.members
    from walk as w
    inner join rules as r on r.framework = w.framework and r.version = w.version and r.rule = w.rule
    where w.step = array_length(r.steps)
),

siblings as (
    select
        r.framework,
        r.version,
        r.rule,
        e.model,
        e.phase,
        e.src_uid as input_uid,
        list(distinct e.dst_uid order by e.dst_uid) as members
    from edges as e
    inner join nodes as n on n.model = e.model and n.phase = e.phase and n.uid = e.dst_uid
    inner join rules as r
        on
            r.pattern = 'siblings'
            and list_contains(r.steps[1].ops, n.op)
            and (r.steps[1].roles is null or list_contains(r.steps[1].roles, n.role))
            and e.port = r.steps[1].port
    group by r.framework, r.version, r.rule, e.model, e.phase, e.src_uid
    having count(distinct e.dst_uid) >= 2
),

-- a region: from a node matching its first step, forward inside the node's component
-- instance, stopping at nodes matching its second step (kept)
region_walk (framework, version, rule, model, phase, start_uid, uid, is_end) as (
    select
        r.framework,
        r.version,
        r.rule,
        n.model,
        n.phase,
        n.uid as start_uid,
        n.uid,
        false as is_end
    from rules as r
    inner join nodes as n
        on list_contains(r.steps[1].ops, n.op) and (r.steps[1].roles is null or list_contains(r.steps[1].roles, n.role))
    where r.pattern = 'region'
    union
    select
        w.framework,
        w.version,
        w.rule,
        w.model,
        w.phase,
        w.start_uid,
        e.dst_uid as uid,
        list_contains(r.steps[2].ops, n.op) and (r.steps[2].roles is null or list_contains(r.steps[2].roles, n.role))
            as is_end
    from region_walk as w
    inner join rules as r on r.framework = w.framework and r.version = w.version and r.rule = w.rule
    inner join edges as e on e.model = w.model and e.phase = w.phase and e.src_uid = w.uid
    inner join nodes as n on n.model = e.model and n.phase = e.phase and n.uid = e.dst_uid
    where
        not w.is_end
        and regexp_replace(e.dst_uid, '\.[^./]*$', '') = regexp_replace(w.start_uid, '\.[^./]*$', '')
),

regions as (
    select
        framework,
        version,
        rule,
        model,
        phase,
        start_uid as input_uid,
        list(distinct uid order by uid) as members
    from region_walk
    group by framework, version, rule, model, phase, start_uid
    having bool_or(is_end)
),

singles as (
    select
        r.framework,
        r.version,
        r.rule,
        n.model,
        n.phase,
        n.uid as input_uid,
        [n.uid] as members
    from rules as r
    inner join nodes as n
        on list_contains(r.steps[1].ops, n.op) and (r.steps[1].roles is null or list_contains(r.steps[1].roles, n.role))
    where r.pattern = 'node'
),

matches as (
    select * from chains
    union all
    select * from siblings
    union all
    select * from singles
    union all
    select * from regions
)

select
    m.model,
    m.phase,
    m.framework,
    m.version,
    m.rule,
    r.priority,
    r.pattern,
    r.kernel,
    m.input_uid,
    m.members,
    r.tp_min,
    r.flag
from matches as m
inner join rules as r on r.framework = m.framework and r.version = m.version and r.rule = m.rule
