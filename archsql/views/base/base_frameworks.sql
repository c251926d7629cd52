-- Serving frameworks and the default of the option that sizes their memory (parameter table).
select
    framework,
    memory_knob,
    default_fraction,
    source
from frameworks
