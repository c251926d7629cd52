-- How models are laid out on GPUs (parameter table); the degrees are base_deployment_mesh rows.
select
    deployment,
    gpu,
    gpus,
    cp_kind,
    nodes,
    weight_dtype,
    act_dtype,
    kv_dtype,
    usable_memory_fraction,
    weight_profile,
    speculative_tokens
from deployments
