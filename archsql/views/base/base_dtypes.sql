-- Storage dtypes and their size (parameter table).
-- A dtype whose bytes parameter_checks flags is left out.
select
    dtype,
    bytes,
    description
from dtypes as t
where not exists (
    select 1 from lookup_checks as x where x.entity = 'dtype' and x.name = t.dtype
)
