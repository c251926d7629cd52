-- One row per model in the store.
select
    model,
    hf_id,
    spec_file,
    config_file,
    spec_sha256
from models
