-- Imported sources: one row per partition (table kernel_corpus_sources).
select
    source_key,
    source,
    source_hash,
    origin,
    location,
    partition_file,
    rows_read,
    rows_kept,
    rows_rejected,
    rows_already_present,
    imported_at,
    archsql_version,
    environment
from kernel_corpus_sources
