"""The GPU table: vendor figures with their sources and the flags where sources disagree.

``gpus.csv`` (copied from the project's shared facts, see SOURCES.md) becomes the ``gpus``
parameter table of the store; adding a GPU is one row.  Deployments and kernel-corpus rows
name a ``gpu``; the view ``int_gpu_specs`` turns the published units into per-second peaks
per dtype.  Loading and checking the CSV is :mod:`archsql.gpus.table` (schema documented
there).
"""

from __future__ import annotations

from archsql.errors import GpuTableError
from archsql.gpus.table import GPUS_CSV, gpu_schema, load_gpus

__all__ = ["GPUS_CSV", "GpuTableError", "gpu_schema", "load_gpus"]
