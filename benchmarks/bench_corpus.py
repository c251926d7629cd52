"""Kernel-corpus speed (a script, not a test): ``python benchmarks/bench_corpus.py``
(archsql installed, or ``PYTHONPATH=.`` from the repository root).

Imports the whole aiconfigurator-core database (every system, ~12.6 M rows, 736 Parquet
tables) into a fresh store in a temp folder — read, map, validate every row (schema,
registries, duplicates, implied MFU/MBU/link use against the GPU table), write the Parquet
partitions, register sources and rejects — pinned to ``--cores`` CPUs where the OS allows.
The data comes from the installed package (``pip install 'archsql[aiconfigurator]'``) or
``--from`` a wheel / unpacked folder (``pip download aiconfigurator-core --no-deps``).
Store initialization (parameter tables, views) is timed apart from the import.  Then it
re-imports (every source skipped: idempotent) and times corpus queries through
``archsql.api.query`` (best of ``--repeat``):

* ``summary``: the ``kernel_corpus_summary`` view (rows per GPU × op family × library × version);
* ``gemm lookup``: one GEMM signature (H200 SXM, vLLM, BF16, m = 2048, n = k = 4096);
* ``gemm mfu``: implied MFU statistics of every H200 SXM GEMM (``kernel_measurements``).

Target: import < 60 s on 2 cores.  ``--strict`` exits with 1 when missed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from archsql import api
from archsql.kernel_corpus import import_aiconfigurator, open_corpus

TARGET_S = 60.0
QUERIES = {
    "summary": "select * from kernel_corpus_summary",
    "gemm lookup": (
        "select kernel, library_version, latency_us from kernel_corpus where gpu = 'H200 SXM' and op_kind = 'gemm' "
        "and library = 'vllm' and dtype = 'bf16' and m = 2048 and n = 4096 and k = 4096"
    ),
    "gemm mfu": (
        "select count(*) as rows, median(mfu) as median_mfu, max(mfu) as max_mfu from kernel_measurements "
        "where gpu = 'H200 SXM' and op_kind = 'gemm'"
    ),
}


def pin(cores: int) -> str:
    if cores <= 0 or not hasattr(os, "sched_setaffinity"):
        return f"all {os.cpu_count()} CPUs"
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    os.sched_setaffinity(0, cpus)
    return f"{len(cpus)} CPU(s) {cpus}"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="location", default=None, help="a wheel or unpacked folder")
    parser.add_argument("--systems", default=None, help="comma-separated subset (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2, help="pin to this many CPUs (0: no pinning)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    systems = args.systems.split(",") if args.systems else None

    cpus = pin(args.cores)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory(prefix="archsql-bench-corpus-") as tmp:
        db = Path(tmp) / "store.duckdb"
        t0 = time.perf_counter()
        open_corpus(db).close()
        init_s = time.perf_counter() - t0

        c0, t0 = cpu_seconds(), time.perf_counter()
        report = import_aiconfigurator(db, location=args.location, systems=systems)
        import_s, import_cpu = time.perf_counter() - t0, cpu_seconds() - c0

        t0 = time.perf_counter()
        again = import_aiconfigurator(db, location=args.location, systems=systems)
        reimport_s = time.perf_counter() - t0

        timings = {}
        for name, sql in QUERIES.items():
            api.query(sql, db=db)  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = api.query(sql, db=db)
                times.append(time.perf_counter() - t0)
            timings[name] = (min(times), result.num_rows, result.to_pylist()[:1])
        folder = Path(str(db).removesuffix(".duckdb") + ".kernel_corpus")
        partition_bytes = sum(p.stat().st_size for p in folder.rglob("*.parquet"))
        store_bytes = db.stat().st_size

    read, kept, rejected = (report.total(a) for a in ("rows_read", "rows_kept", "rows_rejected"))
    print(f"archsql kernel-corpus benchmark ({cpus}; load average {load:.2f} when it started)")
    print(f"  store initialization (parameter tables, model and corpus views): {init_s:.2f} s")
    print(
        f"  import aiconfigurator-core ({len(report.imported)} tables): {read:,} rows read, {kept:,} kept, "
        f"{rejected:,} rejected in {import_s:.2f} s wall, {import_cpu:.2f} s CPU ({read / import_s:,.0f} rows/s); "
        f"partitions {partition_bytes / 1e6:.1f} MB, store {store_bytes / 1e6:.1f} MB"
    )
    for _, reason, n in report.reasons[:8]:
        print(f"    rejected {n:>9,}  {reason[:110]}")
    print(f"  re-import: {len(again.skipped)} sources skipped as already imported in {reimport_s:.2f} s")
    for name, (best, rows, first) in timings.items():
        print(f"  query {name}: best of {args.repeat} {best * 1e3:.0f} ms ({rows} rows; first {first})")
    checks = [
        (f"import < {TARGET_S:g} s", import_s < TARGET_S, f"{import_s:.2f} s"),
        ("every row kept or rejected", kept + rejected == read, f"{kept:,} + {rejected:,} of {read:,}"),
        ("re-import skips everything", not again.imported, f"{len(again.imported)} imported again"),
    ]
    print("targets:")
    for label, ok, got in checks:
        print(f"  [{'pass' if ok else 'FAIL'}] {label}: {got}")
    return 1 if args.strict and not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
