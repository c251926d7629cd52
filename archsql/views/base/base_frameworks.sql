-- Serving frameworks and the default of the option that sizes their memory (parameter table).
-- A framework whose default fraction parameter_checks flags is left out.
select
    framework,
    memory_knob,
    default_fraction,
    source
from frameworks as t
where not exists (
    select 1 from lookup_checks as x where x.entity = 'framework' and x.name = t.framework
)
