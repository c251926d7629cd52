-- Evidence records of each audit card (archsql audit --evidence, design store): path, hash check, benchmark, level, quality, cost, failure and problems.
select
    e.audit_id,
    c.baseline,
    c.candidate,
    e.path,
    e.status,
    e.benchmark,
    e.evidence_level,
    e.quality_pass,
    e.cost_pass,
    e.failure,
    array_to_string(e.problems, ' | ') as problems,
    e.sha256_referenced,
    e.sha256_now
from audit_evidence as e
inner join audit_cards as c on c.audit_id = e.audit_id
order by c.created_at, e.audit_id, e.path
