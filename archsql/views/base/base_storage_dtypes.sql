-- Bits per element of every stored dtype (parameter table).
select
    dtype,
    bits,
    description
from storage_dtypes
