"""The GPU table (archsql/gpus/gpus.csv): schema, figures as published, located rejections.

H200 SXM row (gpus.csv, sources S1;S5;S6): 141 GB HBM3e, 4.8 TB/s, 989 dense BF16 TFLOP/s,
1978 dense FP8, NVLink 4 at 900 GB/s bidirectional, 700 W.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from archsql.errors import GpuTableError
from archsql.gpus import GPUS_CSV, load_gpus
from archsql.gpus.table import SOURCES_MD, gpu_schema
from archsql.store import _DEFAULTS

HEADER = GPUS_CSV.read_text(encoding="utf-8").splitlines()[0]


def test_loads_with_the_store_schema():
    table = load_gpus()
    assert table.schema == gpu_schema()
    assert _DEFAULTS["gpus"]().equals(table)  # the store's default parameter table is this loader's
    gpus = table.column("gpu").to_pylist()
    assert len(gpus) == len(set(gpus)) >= 19
    h200 = next(r for r in table.to_pylist() if r["gpu"] == "H200 SXM")
    assert (h200["memory_capacity"], h200["mem_bandwidth_TBps"]) == (141.0, 4.8)
    assert (h200["bf16_fp16_dense_tflops"], h200["fp8_dense_tflops"], h200["fp4_dense_tflops"]) == (989.0, 1978.0, None)
    assert h200["scaleup_bw_direction"].startswith("bidirectional") and h200["tdp_w"] == 700.0
    assert h200["sources"] == "S1;S5;S6;S28" and "S6 (third-party)" in h200["flags"]
    # marketed 141 GB kept; the device exposes 143771 MiB (nvidia-smi, S28), a flagged disagreement
    assert (h200["device_memory_MiB"], h200["device_memory_sources"]) == (143771.0, "S28")
    assert "DISAGREE on capacity" in h200["flags"]


def _table(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    folder = tmp_path / "gpus"
    folder.mkdir()
    shutil.copy(SOURCES_MD, folder / "SOURCES.md")
    path = folder / "gpus.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


GOOD = "X1,Vendor,SXM,80,GB,,,HBM3,3.35,989,1978,,1978,,NVLink 4,900,bidirectional,8,400,700,S1,"


def test_adding_a_gpu_is_one_row(tmp_path):
    lines = GPUS_CSV.read_text(encoding="utf-8").splitlines()
    path = _table(tmp_path, *lines[1:], GOOD)
    table = load_gpus(path)
    assert table.num_rows == len(lines)
    assert table.to_pylist()[-1]["gpu"] == "X1"


def test_every_malformed_row_is_reported_with_its_line(tmp_path):
    path = _table(
        tmp_path,
        GOOD,  # line 2
        "X2,Vendor,SXM,80,GB,,,HBM3,fast,989,,,,,,,,,,,S1,",  # line 3: bandwidth not a number
        "X3,Vendor,SXM,80,GB,HBM3,3.35,989",  # line 4: too few fields
        GOOD,  # line 5: X1 again
        "X4,Vendor,SXM,-5,GB,,,HBM3,3.35,0,,,,,,,,,,,S99,",  # line 6: negative memory, zero peak, unknown source
        "X5,Vendor,SXM,80,gigabytes,,,HBM3,3.35,989,,,,,,,,,,,,",  # line 7: unit, no source
        "X6,Vendor,SXM,80,GB,81559,,HBM3,3.35,989,,,,,,,,,,,S1,",  # line 8: device memory without source
    )
    with pytest.raises(GpuTableError) as info:
        load_gpus(path)
    found = {(i.line, i.path or "") for i in info.value.issues}
    assert (3, "mem_bandwidth_TBps") in found
    assert (4, "") in found and any(i.expected == "22" and i.got == "8" for i in info.value.issues)
    assert (5, "gpu") in found
    assert {(6, "memory_capacity"), (6, "bf16_fp16_dense_tflops"), (6, "sources")} <= found
    assert {(7, "memory_capacity_unit"), (7, "sources")} <= found
    assert (8, "device_memory_sources") in found
    text = str(info.value)
    assert "gpus.csv:3 mem_bandwidth_TBps: mem_bandwidth_TBps must be a positive number or empty" in text
    assert "already defined on line 2" in text and "source 'S99' is not defined in SOURCES.md" in text
    assert "Traceback" not in text


def test_header_problems_name_the_column(tmp_path):
    header = HEADER.replace("tdp_w", "tdp_watts")
    path = _table(tmp_path, GOOD, header=header)
    with pytest.raises(GpuTableError) as info:
        load_gpus(path)
    messages = [(i.message, i.hint, i.line) for i in info.value.issues]
    assert ("unknown column 'tdp_watts'", "did you mean 'tdp_w'?", 1) in messages
    assert any(m == "missing column 'tdp_w'" for m, _, _ in messages)


def test_unreadable_or_empty_file(tmp_path):
    with pytest.raises(GpuTableError, match="cannot read the GPU table"):
        load_gpus(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(GpuTableError, match="empty"):
        load_gpus(empty)
