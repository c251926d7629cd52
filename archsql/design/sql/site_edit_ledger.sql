-- Old → new ledger of each recorded model edit (archsql edit, design store): every layer group and the whole model, as the edit reported it.
select
    e.edit,
    e.base,
    e.context,
    e.batch,
    e.kv_dtype,
    e.weight_profile,
    e.deployment,
    l.position,
    l.scope,
    coalesce(l.template, case when l.scope = 'model' then 'whole model' else 'outside stacks' end) as layer_group,
    l.layers_old,
    l.layers_new,
    l.quantity,
    l.unit,
    l.old,
    l.new,
    l.delta,
    l.ratio
from design_edit_ledger as l
inner join design_edits as e on e.edit = l.edit
order by e.created_at, e.edit, l.position
