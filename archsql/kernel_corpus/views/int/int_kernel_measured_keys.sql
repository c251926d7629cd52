-- Every correct measurement of the corpus with its join key: the values of its op kind's
-- signature fields (base_kernel_op_kinds.signature, the registry's order) in the conventions
-- the model side's signatures use — a weight or KV dtype not stated is the compute dtype, an
-- unstated tp / ep / node count is 1, a value head as wide as the key head and a window of 0
-- are not stated.  measured_vs_sol (kernel by primitive) and measured_vs_kernels (kernel as a
-- framework launches it) join on it.
with

op_kinds as (
    select
        op_kind,
        signature
    from base_kernel_op_kinds
),

corpus as (
    select
        * replace (
            coalesce(weight_dtype, dtype) as weight_dtype,
            coalesce(kv_dtype, dtype) as kv_dtype,
            coalesce(tp, 1) as tp,
            coalesce(ep, 1) as ep,
            coalesce(nodes, 1) as nodes,
            nullif(v_head_dim, head_dim) as v_head_dim,
            nullif(window_size, 0) as window_size
        )
    from base_kernel_corpus
    where check_status is distinct from 'failed'
)

select
    c.source_hash,
    c.source_row,
    c.source,
    c.gpu,
    c.op_kind,
    c.library,
    c.library_version,
    c.kernel,
    c.latency_us,
    list_transform(o.signature, lambda f: json_extract_string(to_json(c), f)) as key
from corpus as c
inner join op_kinds as o on o.op_kind = c.op_kind
