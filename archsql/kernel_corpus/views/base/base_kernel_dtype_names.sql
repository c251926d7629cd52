-- The dtype spellings a measurement may use (table kernel_dtype_names, written from
-- archsql.kernel_corpus.registry.DTYPE_NAMES).
select
    name,
    dtype,
    weight_dtype,
    quant
from kernel_dtype_names
