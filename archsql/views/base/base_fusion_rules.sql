-- The frameworks' fusion rules (reference table, written from archsql/specs/fusion/*.yaml on
-- every build): what each framework version launches for a pattern of primitives.
select
    framework,
    version,
    versions,
    rule,
    priority,
    pattern,
    first_op,
    first_role,
    second_op,
    second_role,
    port,
    kernel,
    tp_min,
    phase,
    flag,
    source_file,
    source_function,
    doc
from fusion_rules
