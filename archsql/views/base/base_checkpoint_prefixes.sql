-- Multimodal wrapper prefixes of tensor names and their canonical form (parameter table).
select
    prefix,
    canonical,
    description
from checkpoint_prefixes
