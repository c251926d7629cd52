"""Load and check the GPU table, ``archsql/gpus/gpus.csv``.

The CSV is the project's shared GPU facts (``shared/data/gpus.csv``) copied with its sources
(``SOURCES.md``); adding a GPU is adding one row.  :func:`load_gpus` returns it as an Arrow
table with the store's ``gpus`` parameter-table schema (:data:`GPU_SCHEMA`, defined once in
``archsql.schema.tables.PARAMETER_TABLES``).  Numbers keep the published units; the view
``int_gpu_specs`` turns them into per-second peaks per dtype, so a unit is converted in one
place.

Schema (one row per GPU; empty cell = no figure found in an available source):

===========================  =======  =====================================================
column                       type     meaning
===========================  =======  =====================================================
gpu                          string   the GPU's name, the key deployments and the kernel
                                      corpus use (``H200 SXM``, ``B200 (HGX/DGX B200)``)
vendor                       string   NVIDIA, AMD, Intel, Google
form_factor                  string   SXM5, PCIe card, OAM, ...
memory_capacity              double   in ``memory_capacity_unit``
memory_capacity_unit         string   starts with GB (10^9 B), GiB (2^30 B) or MiB (2^20 B),
                                      then how the source states it (the marketed figure)
device_memory_MiB            double   total memory the device exposes, MiB (2^20 B), as
                                      nvidia-smi / NVML memory.total reports it; what a
                                      framework sizes its memory fraction against
device_memory_sources        string   ``;``-separated SOURCES.md ids for device_memory_MiB
memory_type                  string   HBM3, HBM3e, GDDR7, ...
mem_bandwidth_TBps           double   memory bandwidth, TB/s (10^12 B/s)
bf16_fp16_dense_tflops       double   dense BF16 (or FP16) matrix peak, TFLOP/s
fp8_dense_tflops             double   dense FP8 matrix peak, TFLOP/s
fp4_dense_tflops             double   dense FP4 matrix peak, TFLOP/s
int8_dense_tops              double   dense INT8 matrix peak, TOP/s
tf32_dense_tflops            double   dense TF32 matrix peak, TFLOP/s
scaleup_interconnect         string   NVLink 4, Infinity Fabric, PCIe, ...
scaleup_bw_GBps              double   scale-up bandwidth per GPU, GB/s, direction as stated
scaleup_bw_direction         string   ``bidirectional (...)`` or ``per direction``, as stated
scaleup_domain_gpus          double   GPUs in one scale-up domain
scaleout_nic_per_gpu_Gbps    double   scale-out NIC per GPU, Gbit/s (a deployment choice)
tdp_w                        double   board power, W
sources                      string   ``;``-separated ids of ``SOURCES.md`` (S1;S3)
flags                        string   caveats and disagreements between sources
===========================  =======  =====================================================

A malformed file is rejected as a whole with every problem located (``gpus.csv:7 …``):
unknown or missing columns, a row with the wrong number of fields, a number that does not
parse or is negative, an empty or repeated ``gpu``, a memory unit that is not GB/GiB/MiB,
a source id that ``SOURCES.md`` does not define, a device memory without its source.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pyarrow as pa

from archsql.errors import GpuTableError, Issue, did_you_mean

GPUS_CSV = Path(__file__).with_name("gpus.csv")
SOURCES_MD = Path(__file__).with_name("SOURCES.md")

MEMORY_UNITS = ("GiB", "MiB", "GB")  # first token of memory_capacity_unit
REQUIRED_TEXT = ("gpu", "vendor")
POSITIVE = (  # a figure that is given must be > 0 (zero bandwidth or peak is a typo)
    "memory_capacity",
    "device_memory_MiB",
    "mem_bandwidth_TBps",
    "bf16_fp16_dense_tflops",
    "fp8_dense_tflops",
    "fp4_dense_tflops",
    "int8_dense_tops",
    "tf32_dense_tflops",
    "scaleup_bw_GBps",
    "scaleup_domain_gpus",
    "scaleout_nic_per_gpu_Gbps",
    "tdp_w",
)
# GPU facts as published (archsql/gpus/gpus.csv, with per-row sources and disagreement
# flags); dense peaks in TFLOP/s, HBM in TB/s, scale-up links in GB/s.
GPU_SCHEMA = pa.schema(
    [
        ("gpu", pa.string()),
        ("vendor", pa.string()),
        ("form_factor", pa.string()),
        ("memory_capacity", pa.float64()),
        ("memory_capacity_unit", pa.string()),
        ("device_memory_MiB", pa.float64()),
        ("device_memory_sources", pa.string()),
        ("memory_type", pa.string()),
        ("mem_bandwidth_TBps", pa.float64()),
        ("bf16_fp16_dense_tflops", pa.float64()),
        ("fp8_dense_tflops", pa.float64()),
        ("fp4_dense_tflops", pa.float64()),
        ("int8_dense_tops", pa.float64()),
        ("tf32_dense_tflops", pa.float64()),
        ("scaleup_interconnect", pa.string()),
        ("scaleup_bw_GBps", pa.float64()),
        ("scaleup_bw_direction", pa.string()),
        ("scaleup_domain_gpus", pa.float64()),
        ("scaleout_nic_per_gpu_Gbps", pa.float64()),
        ("tdp_w", pa.float64()),
        ("sources", pa.string()),
        ("flags", pa.string()),
    ]
)
_SOURCE_ROW = re.compile(r"^\|\s*(S\d+)\s*\|", re.MULTILINE)


def gpu_schema() -> pa.Schema:
    """The ``gpus`` parameter-table schema (the store's contract)."""
    return GPU_SCHEMA


def load_gpus(path: str | Path | None = None, sources: str | Path | None = None) -> pa.Table:
    """The GPU table as Arrow (:func:`gpu_schema`); raises :class:`GpuTableError` listing
    every malformed row and column with its line.  ``sources`` is the SOURCES.md whose ids
    the ``sources`` column may cite (default: the one beside the CSV)."""
    path = Path(path) if path is not None else GPUS_CSV
    sources = Path(sources) if sources is not None else path.with_name(SOURCES_MD.name)
    schema = gpu_schema()
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GpuTableError(issues=[Issue(f"cannot read the GPU table: {exc}", file=file)]) from None
    known_sources = _source_ids(sources)
    reader = csv.reader(text.splitlines(keepends=True))
    header = next(reader, None)
    if not header:
        raise GpuTableError(issues=[Issue("the GPU table is empty", file=file, line=1)])
    issues = _check_header(header, schema, file)
    if issues:
        raise GpuTableError(issues=issues)
    columns: dict[str, list] = {name: [] for name in schema.names}
    first_line: dict[str, int] = {}
    line = 1
    for fields in reader:
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue  # blank line
        if len(fields) != len(header):
            issues.append(
                Issue(
                    "wrong number of fields",
                    file=file,
                    line=line,
                    expected=str(len(header)),
                    got=str(len(fields)),
                    hint="quote a value that contains a comma",
                )
            )
            continue
        row = dict(zip(header, fields, strict=True))
        parsed, row_issues = _parse_row(row, schema, file, line, known_sources)
        gpu = parsed["gpu"]
        if gpu and gpu in first_line:
            row_issues.append(
                Issue(f"gpu '{gpu}' is already defined on line {first_line[gpu]}", file=file, line=line, path="gpu")
            )
        elif gpu:
            first_line[gpu] = line
        issues += row_issues
        for name in schema.names:
            columns[name].append(parsed[name])
    if issues:
        raise GpuTableError(f"{file}: {len(issues)} problem(s) in the GPU table", issues)
    return pa.table({name: pa.array(columns[name], type=schema.field(name).type) for name in schema.names})


def parse_gpu_row(row: dict[str, str], label: str) -> tuple[dict, list[Issue]]:
    """One GPU row given as text per column (every column of :data:`GPU_SCHEMA`), checked by
    the rules of a gpus.csv row (numbers positive, memory unit, sources cited); ``sources``
    is free text here (a row added to a store cites its own datasheet, not SOURCES.md)."""
    return _parse_row(row, GPU_SCHEMA, label, None, None)


def _source_ids(path: Path) -> set[str] | None:
    try:
        return set(_SOURCE_ROW.findall(path.read_text(encoding="utf-8")))
    except OSError:
        return None  # no SOURCES.md beside the CSV: source ids are not checked


def _check_header(header: list[str], schema: pa.Schema, file: str) -> list[Issue]:
    issues = []
    seen: set[str] = set()
    for column, name in enumerate(header, start=1):
        if name in seen:
            issues.append(Issue(f"column '{name}' appears twice", file=file, line=1, column=column))
        seen.add(name)
        if name not in schema.names:
            issues.append(
                Issue(
                    f"unknown column '{name}'",
                    file=file,
                    line=1,
                    column=column,
                    hint=did_you_mean(name, schema.names),
                )
            )
    issues += [
        Issue(f"missing column '{name}'", file=file, line=1, hint="the header lists every column of the GPU table")
        for name in schema.names
        if name not in seen
    ]
    return issues


def _parse_row(
    row: dict[str, str], schema: pa.Schema, file: str, line: int | None, known_sources: set[str] | None
) -> tuple[dict, list[Issue]]:
    out: dict = {}
    issues: list[Issue] = []
    for field in schema:
        raw = row[field.name].strip()
        if not pa.types.is_floating(field.type):
            out[field.name] = raw or None
            continue
        if not raw:
            out[field.name] = None
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (value == 0 and field.name in POSITIVE):
            issues.append(
                Issue(
                    f"{field.name} must be a positive number or empty",
                    file=file,
                    line=line,
                    path=field.name,
                    got=repr(raw),
                )
            )
            value = None
        out[field.name] = value
    for name in REQUIRED_TEXT:
        if not out.get(name):
            issues.append(Issue(f"{name} must not be empty", file=file, line=line, path=name))
    unit = out.get("memory_capacity_unit")
    if out.get("memory_capacity") is not None and not (unit and unit.split()[0] in MEMORY_UNITS):
        issues.append(
            Issue(
                "memory_capacity_unit must start with the unit of memory_capacity",
                file=file,
                line=line,
                path="memory_capacity_unit",
                expected=" or ".join(MEMORY_UNITS),
                got=repr(unit),
            )
        )
    device_cited = [s.strip() for s in (out.get("device_memory_sources") or "").split(";") if s.strip()]
    if out.get("device_memory_MiB") is not None and not device_cited:
        issues.append(
            Issue(
                "device_memory_MiB needs device_memory_sources",
                file=file,
                line=line,
                path="device_memory_sources",
                hint="cite the nvidia-smi report, e.g. S28",
            )
        )
    cited = [s.strip() for s in (out.get("sources") or "").split(";") if s.strip()]
    if not cited:
        issues.append(
            Issue(
                "sources must cite at least one SOURCES.md id", file=file, line=line, path="sources", hint="e.g. S1;S3"
            )
        )
    elif known_sources is not None:
        for sid in dict.fromkeys([*cited, *device_cited]):
            if sid not in known_sources:
                issues.append(
                    Issue(
                        f"source '{sid}' is not defined in SOURCES.md",
                        file=file,
                        line=line,
                        path="sources",
                        hint=did_you_mean(sid, known_sources),
                    )
                )
    return out, issues
