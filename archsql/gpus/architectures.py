"""The architecture family of each GPU (``architectures.csv``): what a framework's kernel
choice keys on (a fused all-reduce kernel built for Hopper and Blackwell, a whole-MoE kernel
for Blackwell only).  The reference table ``gpu_architectures``; a GPU without a row has no
family, and a fusion rule conditioned on one says so (``fusion_hits.reason``)."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa

ARCHITECTURES_CSV = Path(__file__).with_name("architectures.csv")

GPU_ARCHITECTURES_SCHEMA = pa.schema(
    [("gpu", pa.string()), ("family", pa.string()), ("compute_capability", pa.string()), ("source", pa.string())]
)


def gpu_architectures_table(path: Path = ARCHITECTURES_CSV) -> pa.Table:
    with path.open(newline="", encoding="utf-8") as f:
        rows = [{k: (v or None) for k, v in row.items()} for row in csv.DictReader(f)]
    return pa.Table.from_pylist(rows, schema=GPU_ARCHITECTURES_SCHEMA)
