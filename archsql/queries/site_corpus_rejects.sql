-- Rows the kernel corpus imports rejected, per source, op kind, field and reason, with the first location and its value.
select
    source_key,
    op_kind,
    field,
    reason,
    count(*) as rows,
    arg_min(location || coalesce(':' || source_row, ''), coalesce(source_row, 0)) as first_location,
    arg_min(value, coalesce(source_row, 0)) as first_value
from kernel_corpus_rejects
group by source_key, op_kind, field, reason
order by source_key, rows desc, reason, op_kind, field
