-- The op-kind registry (table kernel_op_kinds, written from archsql.kernel_corpus.registry).
select
    op_kind,
    family,
    required,
    contract,
    signature
from kernel_op_kinds
