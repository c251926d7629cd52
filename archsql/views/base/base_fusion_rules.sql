-- The frameworks' fusion rules (reference table, written from archsql/specs/fusion/*.yaml on
-- every build): what each framework version launches for a pattern of primitives.
select
    framework,
    version,
    versions,
    rule,
    priority,
    pattern,
    steps,
    kernel,
    op_kind,
    call,
    tp_min,
    phase,
    flag,
    flag_default,
    dim,
    dim_values,
    act_dtypes,
    gpu_families,
    model_roles,
    source_file,
    source_function,
    doc
from fusion_rules
