"""Core timings of archsql (a script, not a test): ``python benchmarks/bench_core.py``
(archsql installed, or ``PYTHONPATH=.`` from the repository root).

1. Full catalog build: ``archsql.api.build`` of every catalog model into a temp DuckDB file.
2. Evaluation: ``archsql.evaluator.evaluate`` of each model; the largest model (by params)
   and the slowest one.
3. Sweep: the ``workloads`` table of the built store replaced by N random (seeded) rows,
   then one aggregate over the ``flops`` view (all models × N workloads), best of 3 after a
   warm-up.

Targets: catalog build < 15 s; 10k-workload × all-models query < 1 s.  ``--strict`` exits
with 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql import api
from archsql.evaluator import evaluate
from archsql.schema.tables import PARAMETER_TABLES

BUILD_TARGET_S = 15.0
QUERY_TARGET_S = 1.0
SWEEP_SQL = "select count(*) as rows, sum(flops) as flops from flops"


def random_workloads(n: int, seed: int) -> pa.Table:
    """N workloads: half prefill (s up to 32K after a prefix of up to 8K cached tokens),
    half decode (s = 1 at a context up to 128K), batch 1..256."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        phase = rng.choice(("prefill", "decode"))
        batch = rng.randint(1, 256)
        if phase == "prefill":
            new_tokens = rng.randint(1, 32768)
            context = new_tokens + rng.choice((0, rng.randint(0, 8192)))
        else:
            new_tokens = 1
            context = rng.randint(1, 131072)
        rows.append(
            {"workload": f"w{i:05d}", "phase": phase, "batch": batch, "new_tokens": new_tokens, "context": context}
        )
    return pa.Table.from_pylist(rows, schema=PARAMETER_TABLES["workloads"])


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    models = api.catalog()
    with tempfile.TemporaryDirectory(prefix="archsql-bench-") as tmp:
        db = Path(tmp) / "bench.duckdb"

        report, build_s = timed(lambda: api.build(models, db=db))

        eval_s: dict[str, float] = {}
        for name in models:
            _, eval_s[name] = timed(lambda name=name: evaluate(name))
        summary = api.query("select model, params from model_summary", db=db).to_pylist()
        params = {r["model"]: r["params"] for r in summary}
        largest = max(params, key=params.get)
        slowest = max(eval_s, key=eval_s.get)

        con = duckdb.connect(str(db))
        try:
            workloads = random_workloads(args.workloads, args.seed)
            con.execute("delete from workloads")
            con.register("bench_workloads", workloads)
            con.execute("insert into workloads select * from bench_workloads")
            con.unregister("bench_workloads")
            con.execute(SWEEP_SQL).fetchall()  # warm-up
            times = []
            for _ in range(args.repeat):
                result, seconds = timed(lambda: con.execute(SWEEP_SQL).fetchall())
                times.append(seconds)
        finally:
            con.close()
    rows, total_flops = result[0]
    query_s = min(times)

    print(f"archsql core benchmark ({len(models)} catalog models)")
    print(f"  catalog build (api.build, {len(report.models)} models -> temp DuckDB): {build_s:8.3f} s")
    print(
        f"  evaluate, largest model by params ({largest}, {params[largest] / 1e9:.1f} B params): "
        f"{eval_s[largest] * 1e3:8.1f} ms"
    )
    print(
        f"  evaluate, slowest model ({slowest}): {eval_s[slowest] * 1e3:8.1f} ms; "
        f"all models: {sum(eval_s.values()):.3f} s"
    )
    print(
        f"  sweep: `{SWEEP_SQL}` over {len(models)} models x {args.workloads} workloads "
        f"= {rows} rows (sum {total_flops:.4g} FLOP): best of {args.repeat} {query_s * 1e3:8.1f} ms "
        f"(all: {', '.join(f'{t * 1e3:.1f}' for t in times)} ms)"
    )

    checks = [
        (f"catalog build < {BUILD_TARGET_S:g} s", build_s < BUILD_TARGET_S, f"{build_s:.3f} s"),
        (
            f"{args.workloads}-workload x all-models query < {QUERY_TARGET_S:g} s",
            query_s < QUERY_TARGET_S,
            f"{query_s:.3f} s",
        ),
        (
            f"sweep covers every model x workload ({len(models) * args.workloads} rows)",
            rows == len(models) * args.workloads,
            f"{rows} rows",
        ),
    ]
    print("targets:")
    for label, ok, got in checks:
        print(f"  [{'pass' if ok else 'FAIL'}] {label}: {got}")
    return 1 if args.strict and not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
