-- Architecture audit cards (archsql audit, design store): baseline → candidate, the changed field, single-variable check, evidence level held, decision and its reasons.
select
    audit_id,
    created_at,
    baseline,
    candidate,
    changed_field,
    array_to_string(differing_fields, ', ') as differing_fields,
    single_variable,
    valid,
    benchmark,
    evidence_level,
    decision,
    array_to_string(reasons, ' | ') as reasons,
    array_to_string(budgets, ', ') as budgets,
    context,
    dtype
from audit_cards
order by created_at, audit_id
