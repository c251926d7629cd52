-- Graph of each recorded model edit (archsql edit, design store): the derived model's nodes and the base's removed ones, each with its diff status and changed attributes.
-- A node is added (only the derived model has it), removed (only the base has it: shown where it
-- was) or changed (both have it and the recorded diff, design_edit_diff, names an attribute of it).
with
edits as (
    select edit, base, created_at
    from design_edits
),

node_changes as (
    select
        edit,
        path as uid,
        string_agg(attribute, ', ' order by position) as changed
    from design_edit_diff
    where status = 'changed' and path not like '$%'
    group by edit, path
),

nodes as (
    select
        e.edit,
        e.created_at,
        'new' as side,
        n.model,
        n.uid,
        n.stack,
        n.template,
        n.component,
        n.op,
        n.role,
        exists (select 1 from base_nodes as o where o.model = e.base and o.uid = n.uid) as in_both
    from edits as e
    inner join base_nodes as n on n.model = e.edit
    union all
    select e.edit, e.created_at, 'old' as side, n.model, n.uid, n.stack, n.template, n.component, n.op, n.role, false
    from edits as e
    inner join base_nodes as n on n.model = e.base
    where not exists (select 1 from base_nodes as m where m.model = e.edit and m.uid = n.uid)
),

outline as (
    select model, uid, template_layers, output_shape
    from int_node_outline
),

params as (
    select model, uid, params
    from int_node_params
)

select
    n.edit,
    n.side,
    n.model,
    n.uid,
    n.stack,
    n.template,
    o.template_layers,
    n.component,
    n.op,
    n.role,
    o.output_shape,
    p.params,
    case
        when n.side = 'old' then 'removed'
        when not n.in_both then 'added'
        when c.uid is not null then 'changed'
        else 'same'
    end as status,
    c.changed
from nodes as n
left join node_changes as c on c.edit = n.edit and c.uid = n.uid
left join outline as o on o.model = n.model and o.uid = n.uid
left join params as p on p.model = n.model and p.uid = n.uid
order by n.created_at, n.edit, n.stack nulls first, n.template nulls first, n.component, n.uid
