"""The store tables ingest fills (a leaf: the schema layer re-exports them)."""

from __future__ import annotations

import pyarrow as pa

# Checkpoint facts, read from file headers (never weight bytes).  Keyed by checkpoint id
# (a local path, or ``hub:<repo>@<revision>``); one row per tensor of every shard.
CHECKPOINT_TABLES: dict[str, pa.Schema] = {
    "checkpoint_tensors": pa.schema(
        [
            ("checkpoint", pa.string()),  # id of the checkpoint (path or hub:repo@revision)
            ("format", pa.string()),  # safetensors | gguf
            ("file", pa.string()),  # shard file name, relative to the checkpoint
            ("name", pa.string()),  # tensor name as stored
            ("dtype", pa.string()),  # stored dtype as the format spells it (BF16, F8_E4M3, U8, Q4_K, ...)
            ("shape", pa.list_(pa.int64())),  # row-major shape ([out, in] for a linear)
            ("offset_begin", pa.int64()),  # byte offset of the data, relative to the data section
            ("offset_end", pa.int64()),  # exclusive; bytes = offset_end - offset_begin (a view)
        ]
    ),
    # which model (and storage profile) a checkpoint is reconciled against
    "checkpoints": pa.schema([("checkpoint", pa.string()), ("model", pa.string()), ("profile", pa.string())]),
}
