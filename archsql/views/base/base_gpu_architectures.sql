-- The architecture family of each GPU (reference table, archsql/gpus/architectures.csv).
select
    gpu,
    family,
    compute_capability,
    source
from gpu_architectures
