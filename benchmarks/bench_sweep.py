"""Sweep benchmark (not a test): ``archsql.sweep.sweep`` over a grid, as ``archsql sweep`` runs it.

Cases (issue 13, targets on 2 cores, measured on a full-catalog store):

* ``llama_1000``: Meta-Llama-3.1-8B on 8 H200, 4 layouts (tp 1, 2, 4, 8; dp fills the
  rest) × 250 (batch, context) points (10 batches × 25 contexts) × 2 phases: 2,000 rows.
  Target < 0.5 s.
* ``deepseek_2000``: DeepSeek-V3 in fp8 on 8 and 16 H200, a layout × batch search (tp 1, 2,
  4, 8 × ep 1, 8) × 125 batches at 4K context: 2,000 rows.  Target < 1 s.

Each case is timed best of N (wall and the CPU time of the best run) after a warm-up call,
and compared with benchmarks/baselines/bench_sweep.json (benchmarks/baseline.py).  With
``--points``, the raw ``step_sol`` view over a DeepSeek-V3-only store whose workloads table
is replaced by N random rows is timed too (earlier targets: 2,000 points < 0.5 s, 100,000
points < 5 s).

    PYTHONPATH=. python -m archsql build --db /tmp/perf/cat.duckdb     # once: the full catalog
    PYTHONPATH=. python benchmarks/bench_sweep.py --db /tmp/perf/cat.duckdb [--repeat 5] [--record]
    PYTHONPATH=. python benchmarks/bench_sweep.py --points 2000 100000  # the raw view, temp store
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from baseline import describe_baseline, record, report, timed

from archsql import sweep as sweeps
from archsql.api import build

BENCH = "bench_sweep"
TARGETS = {"llama_1000": 0.5, "deepseek_2000": 1.0}
RAW_TARGETS = {2000: 0.5, 100_000: 5.0}


def llama_1000() -> tuple[str, list[dict], list[dict]]:
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    contexts = [512 * (i + 1) for i in range(25)]
    deployments, _ = sweeps.grid(["H200 SXM"], [8], batch=[1], context=[1], degrees={"tp": [1, 2, 4, 8]})
    workloads = []
    for phase in ("prefill", "decode"):
        workloads += sweeps.grid(["H200 SXM"], [8], batch=batches, context=contexts, phase=phase)[1]
    return "Meta-Llama-3.1-8B", deployments, workloads


def deepseek_2000() -> tuple[str, list[dict], list[dict]]:
    deployments, workloads = sweeps.grid(
        ["H200 SXM"],
        [8, 16],
        batch=list(range(1, 126)),
        context=[4096],
        weights=["fp8"],
        degrees={"tp": [1, 2, 4, 8], "ep": [1, 8]},
    )
    return "DeepSeek-V3", deployments, workloads


CASES = {"llama_1000": llama_1000, "deepseek_2000": deepseek_2000}


def raw_points(points: list[int], repeat: int, seed: int) -> bool:
    """The step_sol view over N random workloads of a DeepSeek-V3 store (all its deployments)."""
    import duckdb

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sweep.duckdb"
        t0 = time.perf_counter()
        build(["DeepSeek-V3"], db=db)
        print(f"build DeepSeek-V3: {time.perf_counter() - t0:.2f} s")
        con = duckdb.connect(str(db))
        (deployments,) = con.execute("select count(*) from deployments").fetchone()
        for n_points in points:
            rng = random.Random(seed)
            n = max(1, n_points // deployments)
            rows = []
            for i in range(n):
                if i % 2:
                    rows.append((f"w{i}", "decode", rng.randint(1, 512), 1, rng.randint(1024, 131072)))
                else:
                    s = rng.randint(256, 32768)
                    rows.append((f"w{i}", "prefill", 1, s, s))
            con.execute("delete from workloads")
            con.executemany("insert into workloads values (?, ?, ?, ?, ?)", rows)
            timing = timed(lambda: con.execute("select count(*), sum(time_s) from step_sol").fetchone(), repeat)
            ok &= report(BENCH, f"step_sol_{n_points}", timing, RAW_TARGETS.get(n_points))
            timing = timed(
                lambda: con.execute("select count(*), sum(total_bytes) from device_memory").fetchone(), repeat
            )
            report(BENCH, f"device_memory_{n_points}", timing)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an existing store (default: build the two models into a temp store)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--points", type=int, nargs="*", default=[], help="also time the raw step_sol view")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", action="store_true", help="write these figures as the new baseline")
    parser.add_argument("--note", default="", help="with --record: what the baseline is (commit, change)")
    args = parser.parse_args()

    describe_baseline(BENCH)
    ok = True
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "sweep.duckdb"
            build(["Meta-Llama-3.1-8B", "DeepSeek-V3"], db=db)
        store = str(db) if args.db else "temp store: Meta-Llama-3.1-8B, DeepSeek-V3"
        for name in args.cases:
            model, deployments, workloads = CASES[name]()
            rows = sweeps.sweep(model, db, deployments, workloads).num_rows  # warm-up: imports, file cache
            timing = timed(lambda m=model, d=deployments, w=workloads: sweeps.sweep(m, db, d, w), args.repeat)
            print(f"{name}: {model}, {len(deployments)} layouts x {len(workloads)} workloads = {rows} rows")
            ok &= report(BENCH, name, timing, TARGETS[name])
            figures[name] = timing.figures()
        if args.record:
            from archsql.store import connect

            with connect(db) as con:
                (models,) = con.execute("select count(*) from models").fetchone()
            print(f"recorded {record(BENCH, figures, f'{store} ({models} models)', args.note)}")
    if args.points:
        ok &= raw_points(args.points, max(1, args.repeat // 2), args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
