-- How models are laid out on GPUs (parameter table).
select
    deployment,
    gpu,
    gpus,
    tp,
    dp,
    ep,
    moe_tp,
    pp,
    cp,
    cp_kind,
    nodes,
    weight_dtype,
    act_dtype,
    kv_dtype,
    usable_memory_fraction,
    weight_profile
from deployments
