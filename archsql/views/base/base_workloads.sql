-- The workloads users ask about (parameter table).
-- A workload with a row in parameter_checks (or images that break a rule) is left out.
select
    workload,
    phase,
    batch,
    new_tokens,
    context
from workloads as t
where not exists (
    select 1 from workload_checks as x where x.name = t.workload
)
