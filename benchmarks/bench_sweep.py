"""Sweep benchmark (not a test): DeepSeek-V3 step_sol over a grid of deployments × workloads.

Builds DeepSeek-V3 into a temp store, then replaces the workloads table by a seeded random
grid (decode: batch × context; prefill: prompt lengths) so that deployments × workloads =
the number of points, and times `select count(*), sum(time_s) from step_sol` (best of N), then
device_memory over the same points (weights as stored, caches, activation peak; no target).
Targets on 2 cores: 2,000 points < 0.5 s, 100,000 points < 5 s (after the model is built).

    PYTHONPATH=. python benchmarks/bench_sweep.py [--points 2000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import duckdb

from archsql.api import build

TARGETS = {2000: 0.5, 100_000: 5.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[2000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sweep.duckdb"
        t0 = time.perf_counter()
        build(["DeepSeek-V3"], db=db)
        print(f"build DeepSeek-V3: {time.perf_counter() - t0:.2f} s")
        con = duckdb.connect(str(db))
        (deployments,) = con.execute("select count(*) from deployments").fetchone()
        failed = False
        for points in args.points:
            rng = random.Random(args.seed)
            n = max(1, points // deployments)
            rows = []
            for i in range(n):
                if i % 2:
                    rows.append((f"w{i}", "decode", rng.randint(1, 512), 1, rng.randint(1024, 131072)))
                else:
                    s = rng.randint(256, 32768)
                    rows.append((f"w{i}", "prefill", 1, s, s))
            con.execute("delete from workloads")
            con.executemany("insert into workloads values (?, ?, ?, ?, ?)", rows)
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                (count, _total) = con.execute("select count(*), sum(time_s) from step_sol").fetchone()
                times.append(time.perf_counter() - t)
            best = min(times)
            target = TARGETS.get(points)
            verdict = "" if target is None else (" [pass]" if best < target else " [FAIL]")
            failed |= target is not None and best >= target
            print(
                f"{count} points ({deployments} deployments x {n} workloads): best {best:.3f} s{verdict}"
                + (f" (target < {target} s)" if target else "")
            )
            # the memory side of a sweep (weights as stored, caches, activation peak): no target
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                con.execute("select count(*), sum(total_bytes) from device_memory").fetchone()
                times.append(time.perf_counter() - t)
            print(f"  device_memory over the same points: best {min(times):.3f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
