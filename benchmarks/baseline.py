"""Benchmark baselines kept in the repository (benchmarks/baselines/<bench>.json), so a
benchmark prints each figure next to the figure recorded for it and a regression shows as a
ratio above 1.

A baseline file holds the figures (seconds; ``best_s`` the best wall time of N, ``cpu_s``
the process CPU time of that best run) and the machine and conditions they were measured on
(CPU, cores, load average, Python, DuckDB, the store).  The shared 2-core machines these
benchmarks run on are loaded by other work: compare ``cpu_s`` first (it moves much less
with the load than wall time) and read a wall-time ratio with the two load averages.
``--record`` in a benchmark rewrites its file: do it on purpose, with the commit that
changed the figures, never to make a regression disappear.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

BASELINES = Path(__file__).parent / "baselines"


def cpu_seconds() -> float:
    """CPU time of this process so far, every thread (DuckDB's workers) included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_cpu_seconds() -> float:
    """CPU time of the finished child processes so far (a CLI call run by subprocess)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Timing:
    best_s: float
    median_s: float
    cpu_s: float  # CPU time of the best run

    def figures(self) -> dict[str, float]:
        return {"best_s": round(self.best_s, 4), "median_s": round(self.median_s, 4), "cpu_s": round(self.cpu_s, 4)}


def timed(fn: Callable[[], object], repeat: int, *, children: bool = False) -> Timing:
    """Best and median wall time of ``repeat`` calls, and the CPU time of the best one
    (``children``: of the subprocesses the call ran)."""
    clock = child_cpu_seconds if children else cpu_seconds
    runs = []
    for _ in range(repeat):
        c, t = clock(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t, clock() - c))
    best = min(runs)
    return Timing(best[0], statistics.median(r[0] for r in runs), best[1])


def machine(store: str) -> dict[str, object]:
    """Where and under which load the figures were measured."""
    import duckdb

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (None, None, None)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in load if x is not None],
        "python": sys.version.split()[0],
        "duckdb": duckdb.__version__,
        "store": store,
    }


def load(bench: str) -> dict | None:
    path = BASELINES / f"{bench}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def record(bench: str, figures: dict[str, dict[str, float]], store: str, note: str = "") -> Path:
    path = BASELINES / f"{bench}.json"
    path.parent.mkdir(exist_ok=True)
    body = {
        "recorded_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "note": note,
        "machine": machine(store),
        "figures": figures,
    }
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path


def report(bench: str, name: str, timing: Timing, target_s: float | None = None) -> bool:
    """Print one figure with its target verdict and its ratio to the baseline's; True when
    the target (if any) is met by the best wall time."""
    verdict = "" if target_s is None else (" [pass]" if timing.best_s < target_s else " [FAIL]")
    target = "" if target_s is None else f" (target < {target_s:g} s)"
    line = (
        f"{name:>24}: best {timing.best_s * 1000:9.1f} ms, median {timing.median_s * 1000:9.1f} ms, "
        f"cpu {timing.cpu_s * 1000:9.1f} ms{verdict}{target}"
    )
    base = (load(bench) or {}).get("figures", {}).get(name)
    if base:
        line += f"; vs baseline: wall x{timing.best_s / base['best_s']:.2f}, cpu x{timing.cpu_s / max(base['cpu_s'], 1e-9):.2f}"
    print(line)
    return target_s is None or timing.best_s < target_s


def describe_baseline(bench: str) -> None:
    base = load(bench)
    if base is None:
        print(f"no baseline recorded (benchmarks/baselines/{bench}.json): run with --record to make one")
        return
    m = base["machine"]
    print(
        f"baseline {base['recorded_utc']} UTC on {m['cores']} x {m['cpu']}, load {m['load_average_1_5_15']}, "
        f"duckdb {m['duckdb']}, store: {m['store']}"
    )
    if os.getloadavg:
        print(f"now: load {[round(x, 2) for x in os.getloadavg()]}")
