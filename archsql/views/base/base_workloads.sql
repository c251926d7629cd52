-- The workloads users ask about (parameter table).
select
    workload,
    phase,
    batch,
    new_tokens,
    context
from workloads
