"""Arrow schemas of the kernel-corpus tables (the contract of every importer and view).

``kernel_corpus`` has one row per measurement: provenance, the full **workload signature**
(what ran, where, through which software, on which shapes), the time and the reference
check.  Shape fields are those of the kernel as it ran on one device (an attention row of a
TP=8 deployment has the per-device heads, with ``tp`` = 8 saying so); a field an op kind
does not use is null.  Derived quantities (FLOPs, bytes, implied MFU/MBU, a measurement id)
are views (``int_kernel_corpus_work``, ``kernel_measurements``), never stored.

Identity of a row: (``source_hash``, ``source_row``, ``op_kind``) — the content hash of the
source it came from, its row there (a Parquet row index from 0, or a CSV line number), and
the op kind (one aiconfigurator DeepEP row gives a dispatch and a combine row).
"""

from __future__ import annotations

import pyarrow as pa

# Columns a source sets through the importer, never through a CSV column.
PROVENANCE = ("source", "source_key", "source_hash", "source_row")

CORPUS_SCHEMA = pa.schema(
    [
        # -- provenance
        ("source", pa.string()),  # what published it, with version: 'aiconfigurator-core 0.12.0', 'archsql-bench 0.1.0'
        ("source_key", pa.string()),  # stable id of the source across its versions: 'aiconfigurator-core:<path>'
        ("source_hash", pa.string()),  # sha256 (first 16 hex) of the source content = the partition
        ("source_row", pa.int64()),  # row in the source: Parquet row from 0, CSV line number
        # -- what ran
        ("op_kind", pa.string()),  # kernel_op_kinds.op_kind: gemm, attention, moe, all_reduce, ...
        ("op_name", pa.string()),  # the source's own name of the op
        ("phase", pa.string()),  # prefill | decode | verify; null for phase-free ops
        ("model", pa.string()),  # the model a model-specific module belongs to; else null
        ("gpu", pa.string()),  # gpus.gpu ('H200 SXM'), or 'cpu'
        ("device_name", pa.string()),  # as the driver / source names the device ('NVIDIA H200')
        ("library", pa.string()),  # software it ran through: vllm, sglang, trtllm, nccl, torch
        ("library_version", pa.string()),  # its version as the source files it (aiconfigurator: the directory)
        ("library_version_reported", pa.string()),  # the version the measurement itself reported
        ("kernel", pa.string()),  # kernel / backend name (aiconfigurator kernel_source)
        # -- dtypes (canonical: fp32 bf16 fp16 fp8 fp4 int8 int4)
        ("dtype", pa.string()),  # compute / activation dtype: the peak the MFU is against
        ("weight_dtype", pa.string()),  # stored weights, when they differ from dtype (weight-only quant)
        ("kv_dtype", pa.string()),  # KV cache (attention family) or recurrent state (GDN, KDA, Mamba2)
        ("quant", pa.string()),  # the source's quantization scheme (fp8_block, nvfp4, int8_wo, ...)
        # -- parallel setting the per-device shape was cut for
        ("tp", pa.int64()),
        ("ep", pa.int64()),
        ("group_size", pa.int64()),  # ranks in a collective
        ("nodes", pa.int64()),  # nodes the ranks span
        # -- GEMM, quantize
        ("m", pa.int64()),
        ("n", pa.int64()),
        ("k", pa.int64()),
        # -- attention family (per device)
        ("batch", pa.int64()),  # requests
        ("q_len", pa.int64()),  # new tokens per request (s)
        ("kv_len", pa.int64()),  # tokens attended per request after the step (c = cached + new)
        ("heads", pa.int64()),  # query heads on this device (GDN/KDA: value heads; Mamba2: heads)
        ("kv_heads", pa.int64()),  # key/value heads (GDN/KDA: key heads)
        ("head_dim", pa.int64()),  # query/key head dim (MLA: the non-rotary part)
        ("v_head_dim", pa.int64()),  # value head dim when it differs from head_dim
        ("window_size", pa.int64()),  # keys a query sees at most (sliding window); 0/null: all
        # -- MLA / sparse attention
        ("kv_lora_rank", pa.int64()),  # MLA latent width
        ("rope_dim", pa.int64()),  # MLA decoupled rotary head dim
        ("index_topk", pa.int64()),  # DSA: keys selected per query
        ("compress_ratio", pa.int64()),  # compressed attention: tokens per cache entry
        # -- linear attention / SSM
        ("state_dim", pa.int64()),  # SSM state size (Mamba2 d_state)
        ("conv_kernel", pa.int64()),  # causal conv width
        ("ssm_groups", pa.int64()),  # B/C groups (Mamba2 n_groups)
        ("chunk", pa.int64()),  # chunk size of a chunked scan
        # -- MoE, MLP, norms
        ("tokens", pa.int64()),  # tokens in the step (MoE: before routing)
        ("hidden", pa.int64()),  # model width (norms, mhc: the width they work on; causal_conv1d: channels)
        ("inter", pa.int64()),  # FFN / expert intermediate width (before TP)
        ("topk", pa.int64()),  # experts per token
        ("experts", pa.int64()),  # routed experts in the model (before EP)
        ("shared_experts", pa.int64()),
        ("gated", pa.bool_()),  # gated FFN (SwiGLU: gate + up + down); null: unknown
        ("routing", pa.string()),  # token-to-expert distribution: balanced, power_law_1.2, ...
        # -- collectives
        ("message_bytes", pa.int64()),  # bytes per rank as the benchmark sizes them
        # -- the measurement
        ("latency_us", pa.float64()),  # microseconds (harness: median of the repeats)
        ("power_w", pa.float64()),  # mean board power while it ran
        ("power_limit_w", pa.float64()),
        # -- reference check
        ("check_status", pa.string()),  # passed | not_checked (failed rows are rejected)
        ("check_error", pa.float64()),  # max |out - ref| / max |ref|
        ("check_tolerance", pa.float64()),  # the bound check_error was held to (by dtype)
        ("attrs", pa.string()),  # JSON object: source knobs outside the signature
    ]
)

SIGNATURE = tuple(name for name in CORPUS_SCHEMA.names if name not in PROVENANCE)

# One row per imported source: the registry of partitions.
SOURCES_SCHEMA = pa.schema(
    [
        ("source_key", pa.string()),
        ("source", pa.string()),
        ("source_hash", pa.string()),
        ("origin", pa.string()),  # aiconfigurator-core | file | archsql-bench
        ("location", pa.string()),  # the file or package path it was read from
        ("partition_file", pa.string()),  # the Parquet file holding its rows, relative to the corpus folder
        ("rows_read", pa.int64()),
        ("rows_kept", pa.int64()),
        ("rows_rejected", pa.int64()),
        ("rows_already_present", pa.int64()),  # identical rows of an earlier version of this source
        ("imported_at", pa.timestamp("us")),
        ("archsql_version", pa.string()),
        ("environment", pa.string()),  # JSON: versions stamped by the importer / harness
    ]
)

# One row per problem of a rejected row (a row with two problems has two).
REJECTS_SCHEMA = pa.schema(
    [
        ("source_key", pa.string()),
        ("source_hash", pa.string()),
        ("location", pa.string()),  # file the row came from
        ("source_row", pa.int64()),  # CSV line / Parquet row; null for a whole-source problem
        ("op_kind", pa.string()),
        ("field", pa.string()),  # the column with the problem
        ("reason", pa.string()),
        ("value", pa.string()),
        ("imported_at", pa.timestamp("us")),
    ]
)

# Tables of the store (kernel_corpus itself is a view over the Parquet partitions).
TABLES = {
    "kernel_corpus_sources": SOURCES_SCHEMA,
    "kernel_corpus_rejects": REJECTS_SCHEMA,
}


def sql_type(t: pa.DataType) -> str:
    """The DuckDB type of a corpus column's Arrow type."""
    if pa.types.is_string(t):
        return "varchar"
    if pa.types.is_integer(t):
        return "bigint"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    raise AssertionError(f"no DuckDB type for {t}")
