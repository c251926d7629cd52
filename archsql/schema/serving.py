"""Serving facts as data: each framework version's scheduler defaults and metric definitions,
the GPU generation of each GPU, and the serving model's fitted constants.

Three CSV files under ``archsql/specs/serving/`` become three reference tables of the store
(rewritten on every build, like the fusion rules):

* ``frameworks.csv`` → ``serving_frameworks``: per framework, the versions a row holds for
  (space-separated; ``*`` is "version not recorded", the newest defaults listed, flagged by
  the estimate) and the smallest GPU memory it holds from (SGLang and vLLM pick their token
  budget by the device's memory): token budget per step, whether long prompts are chunked,
  whether prefill shares steps with decodes, the request cap, how the KV cache admits a request
  (paged or reserving the whole length), the CUDA-graph batch cap and
  padding step, the memory option and default, the metric definitions and the source (file and
  function of the framework version) of each;
* ``gpu_generations.csv`` → ``serving_gpu_generations``: which efficiency constants a GPU takes;
* ``constants.csv`` → ``serving_constants``: every constant the serving model uses that is
  fitted on measured runs — its name, what it applies to (a GPU generation or a framework),
  value, unit, the rows it was fitted on and how (``benchmarks/bench_silicon.py --fit``).

A row without a source, a duplicate key or an unknown column is a located error.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa

from archsql.errors import Issue, SpecError

SERVING_FRAMEWORKS_SCHEMA = pa.schema(
    [
        ("framework", pa.string()),  # sglang | vllm | trtllm
        ("version", pa.string()),  # one version the row holds for; '*': version not recorded
        ("min_gpu_memory_gib", pa.float64()),  # the row holds on GPUs with at least this memory
        ("max_batched_tokens", pa.int64()),  # token budget of one step (prefill chunk size)
        ("chunked_prefill", pa.bool_()),  # a prompt longer than the budget is split over steps
        ("mixed_steps", pa.bool_()),  # prefill tokens share a step with the running decodes
        # attention-DP ranks run their context (prefill) requests in the same iteration; false: each
        # rank's prefill group takes an iteration of its own while the other ranks wait for it
        ("dp_contexts_aligned", pa.bool_()),
        ("max_running_requests", pa.int64()),  # request cap per engine; null: set by memory
        # how the KV cache admits a request: 'paged' (blocks as tokens are computed; a running
        # request holds isl + osl/2 tokens on average) | 'reserve' (the blocks of isl + osl up front)
        ("kv_admission", pa.string()),
        ("cuda_graph_max_bs", pa.int64()),  # largest decode batch replayed from a CUDA graph
        ("cuda_graph_step", pa.int64()),  # captured batch sizes are multiples of this above it
        ("memory_knob", pa.string()),
        # the framework's memory option; its default for vLLM and SGLang is the `frameworks`
        # parameter table's (one source, read by device_memory); TRT-LLM's free_gpu_memory_fraction
        # (of the memory free after the weights, for the KV cache) is recorded here only
        ("memory_fraction", pa.float64()),
        ("ttft_definition", pa.string()),
        ("tpot_definition", pa.string()),
        ("metric_mean", pa.string()),  # 'request': mean over requests | 'token': over tokens
        ("source", pa.string()),
    ]
)
SERVING_GPU_GENERATIONS_SCHEMA = pa.schema([("gpu", pa.string()), ("generation", pa.string()), ("source", pa.string())])
SERVING_CONSTANTS_SCHEMA = pa.schema(
    [
        ("constant", pa.string()),  # compute_efficiency | memory_efficiency | comm_efficiency | step_overhead_s
        ("applies_to", pa.string()),  # a GPU generation, a framework or (VERSION_SCOPED) framework@version
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("fitted_on", pa.string()),  # which measured rows
        ("method", pa.string()),  # how
    ]
)

# what each constant applies to: a GPU generation (serving_gpu_generations) or a framework
CONSTANT_SCOPES = {
    "compute_efficiency": "generation",
    "memory_efficiency": "generation",
    "comm_efficiency": "generation",
    "comm_latency_s": "generation",
    "kernel_floor_s": "generation",
    "moe_efficiency": "generation",
    "step_overhead_s": "framework",
    "first_wave_share": "framework",
    "request_overhead_s": "framework",
    "eager_launch_s": "framework",
}
# constants a framework version may have its own value of (applies_to 'framework@version', '@*'
# the runs that do not record their version); other versions take the framework's row
VERSION_SCOPED = ("request_overhead_s", "first_wave_share")
_BOOLS = {"true": True, "false": False}
# frameworks.csv kv_admission: blocks allocated as tokens are computed | the whole length reserved
KV_ADMISSIONS = ("paged", "reserve")


def _read(path: Path, schema: pa.Schema, *, list_column: str | None = None) -> list[dict]:
    issues: list[Issue] = []
    rows: list[dict] = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        wanted = [n for n in schema.names if n != "version"] + ([list_column] if list_column else [])
        extra = sorted(set(reader.fieldnames or ()) - set(wanted))
        missing = sorted(set(wanted) - set(reader.fieldnames or ()))
        if extra or missing:
            raise SpecError(
                issues=[
                    Issue(
                        f"{path}: columns {', '.join(extra) or '-'} unknown, {', '.join(missing) or '-'} missing",
                        hint=f"expected columns: {', '.join(wanted)}",
                    )
                ]
            )
        for line, raw in enumerate(reader, start=2):
            row: dict = {}
            for field in schema:
                if field.name == "version" and list_column:
                    continue
                value = (raw.get(field.name) or "").strip()
                try:
                    if value == "":
                        row[field.name] = None
                    elif pa.types.is_boolean(field.type):
                        row[field.name] = _BOOLS[value.lower()]
                    elif pa.types.is_integer(field.type):
                        row[field.name] = int(value)
                    elif pa.types.is_floating(field.type):
                        row[field.name] = float(value)
                    else:
                        row[field.name] = value
                except (KeyError, ValueError):
                    issues.append(Issue(f"{path.name}:{line} {field.name}: cannot read {value!r} as {field.type}"))
            if "source" in schema.names and not row.get("source"):
                issues.append(Issue(f"{path.name}:{line}: a row without a source", hint="name the file and function"))
            if list_column:
                for version in (raw.get(list_column) or "").split():
                    rows.append({**row, "version": version, "_line": line})
            else:
                rows.append({**row, "_line": line})
    if issues:
        raise SpecError(issues=issues)
    return rows


def _keyed(path: Path, rows: list[dict], key: tuple[str, ...], schema: pa.Schema) -> pa.Table:
    seen: dict[tuple, int] = {}
    issues = []
    for row in rows:
        k = tuple(row[c] for c in key)
        if k in seen:
            issues.append(
                Issue(f"{path.name}:{row['_line']}: {dict(zip(key, k, strict=True))} given again (line {seen[k]})")
            )
        seen[k] = row["_line"]
    if issues:
        raise SpecError(issues=issues)
    return pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)


def serving_frameworks_table(directory: Path) -> pa.Table:
    path = directory / "frameworks.csv"
    rows = _read(path, SERVING_FRAMEWORKS_SCHEMA, list_column="versions")
    bad = [r for r in rows if r["kv_admission"] not in KV_ADMISSIONS]
    if bad:
        raise SpecError(
            issues=[
                Issue(
                    f"{path.name}:{r['_line']} kv_admission: expected one of {', '.join(KV_ADMISSIONS)}",
                    got=repr(r["kv_admission"]),
                )
                for r in bad
            ]
        )
    return _keyed(path, rows, ("framework", "version", "min_gpu_memory_gib"), SERVING_FRAMEWORKS_SCHEMA)


def serving_gpu_generations_table(directory: Path) -> pa.Table:
    path = directory / "gpu_generations.csv"
    return _keyed(path, _read(path, SERVING_GPU_GENERATIONS_SCHEMA), ("gpu",), SERVING_GPU_GENERATIONS_SCHEMA)


def serving_constants_table(directory: Path) -> pa.Table:
    path = directory / "constants.csv"
    rows = _read(path, SERVING_CONSTANTS_SCHEMA)
    issues = [
        Issue(f"{path.name}:{r['_line']}: unknown constant {r['constant']!r}", hint=", ".join(CONSTANT_SCOPES))
        for r in rows
        if r["constant"] not in CONSTANT_SCOPES
    ] + [
        Issue(
            f"{path.name}:{r['_line']}: {r['constant']} applies to a framework or a GPU generation, "
            f"not a framework version ({r['applies_to']!r})",
            hint=f"only {', '.join(VERSION_SCOPED)} may apply to framework@version",
        )
        for r in rows
        if "@" in (r["applies_to"] or "") and r["constant"] in CONSTANT_SCOPES and r["constant"] not in VERSION_SCOPED
    ]
    if issues:
        raise SpecError(issues=issues)
    return _keyed(path, rows, ("constant", "applies_to"), SERVING_CONSTANTS_SCHEMA)


def write_constants(directory: Path, table: list[dict]) -> None:
    """Rewrite ``constants.csv`` (the fit's output) in the file's column order."""
    path = directory / "constants.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SERVING_CONSTANTS_SCHEMA.names, lineterminator="\n")
        writer.writeheader()
        for row in table:
            writer.writerow({n: row.get(n) for n in SERVING_CONSTANTS_SCHEMA.names})
