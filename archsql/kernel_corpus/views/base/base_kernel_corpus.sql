-- Measured kernels, one row per measurement (table kernel_corpus, whose columns are
-- archsql.kernel_corpus.schema.CORPUS_SCHEMA: provenance, the workload signature, the time).
select *
from kernel_corpus
