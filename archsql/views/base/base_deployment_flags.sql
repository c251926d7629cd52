-- The framework launch flags each deployment sets (parameter table); a flag without a row is
-- at the default its fusion rule states (base_fusion_rules.flag_default).
select
    deployment,
    flag,
    enabled
from deployment_flags
