-- Storage dtypes and their size (parameter table).
select
    dtype,
    bytes,
    description
from dtypes
