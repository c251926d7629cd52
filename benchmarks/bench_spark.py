"""Spark scale benchmark (not a test): one sweep grid in DuckDB and in Spark local mode.

The full case (issue 18) is a 10M-point sweep: every catalog model (41) × 4 GPUs × 6 layouts
× 100 batches × 102 contexts = 10.04M points (each a prefill and a decode row).  ``--models``,
``--gpus``, ``--layouts``, ``--batch``, ``--context`` size the grid; the default is the full
case.  DuckDB runs it as ``archsql sweep`` does, one sweep per (model, GPU) (split to stay
within a sweep's ``MAX_POINTS``); Spark as one job over every model's partitions and the
whole grid (``archsql.spark.engine.sweep`` with a list of models).  Printed: both times
(wall and CPU, this process and Spark's JVM), the per-point costs, the grid's share of the
10M points, and whether both engines gave the same rows (``archsql.spark.parity``).

    PYTHONPATH=. python benchmarks/bench_spark.py --db /tmp/perf/cat.duckdb --dataset /tmp/perf/fleet
    PYTHONPATH=. python benchmarks/bench_spark.py --db store.duckdb --dataset fleet \\
        --models Meta-Llama-3.1-8B --gpus "H200 SXM" --layouts tp8 tp4,dp2 --batch 1,64 --context 8192

The dataset is exported from the store when ``--dataset`` does not exist yet.

Scaling out.  The evaluated tables are partitioned by model (``export --partition-by model``);
a sweep task reads one model's partitions (partition pruning on ``model = …``) and a grid of
deployments × workloads a few MB at most — Spark broadcasts those parameter tables (below
``spark.sql.autoBroadcastJoinThreshold``, 10 MB) and the GPU/dtype/framework tables to every
executor, so the join of term rows with the grid runs where the model's rows are, without a
shuffle of the term rows.  The shuffles left are the GROUP BYs of the per-device views, keyed
by (model, deployment, workload, …): their size is the number of points, not of term rows.
Running the (model, GPU) sweeps as independent Spark jobs (or one job over a grid that covers
all of them) scales with executors; the per-point cost measured here in local mode on 2 cores
is the upper bound of a cluster's per-core cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import pyarrow as pa

from archsql import sweep as sweeps
from archsql.spark import engine, parity
from archsql.spark.dataset import export_dataset

FULL_POINTS = 10_000_000


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _jvm_cpu(spark) -> float:
    """CPU seconds of Spark's driver JVM (a child of this process) so far."""
    pid = spark.sparkContext._gateway.proc.pid  # the JVM pyspark launched
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--dataset", required=True, type=Path)
    ap.add_argument("--models", nargs="*", default=None, help="default: every model of the store")
    ap.add_argument("--gpus", nargs="*", default=["H200 SXM", "B200 (HGX/DGX B200)", "H100 SXM", "A100 SXM 80GB"])
    ap.add_argument("--layouts", nargs="*", default=["tp1,dp8", "tp2,dp4", "tp4,dp2", "tp8", "tp4,pp2", "tp8,ep8"])
    ap.add_argument("--batch", default=",".join(str(b) for b in range(1, 401, 4)))
    ap.add_argument("--context", default=",".join(str(c) for c in range(1024, 103 * 1024, 1024)))
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    if not (args.dataset / "manifest.json").exists():
        t0 = time.perf_counter()
        export_dataset(args.dataset, args.db)
        print(f"exported {args.db} to {args.dataset} in {time.perf_counter() - t0:.1f} s")
    import duckdb

    con = duckdb.connect(str(args.db), read_only=True)
    models = args.models or [m for (m,) in con.execute("select model from models order by model").fetchall()]
    con.close()
    batch = [int(b) for b in args.batch.split(",")]
    context = [int(c) for c in args.context.split(",")]
    layouts = [sweeps.parse_layout(t) for t in args.layouts]

    spark_conf = {
        "spark.master": args.master,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "4g",
    }
    plan = sweeps.plan(args.gpus, [8], batch, context, layouts=layouts, phase="both")
    points = len(models) * len(plan.deployments) * len(batch) * len(context)
    print(
        f"grid: {len(models)} models × {len(plan.deployments)} deployments ({len(args.gpus)} GPUs × "
        f"{len(layouts)} layouts) × {len(batch)} batches × {len(context)} contexts = {points:,} points "
        f"({points / FULL_POINTS:.2%} of the 10M-point case), both phases: {2 * points:,} rows",
        flush=True,
    )

    # DuckDB: one sweep per (model, GPU), split further to stay within a sweep's MAX_POINTS
    t0, c0 = time.perf_counter(), _cpu()
    duck = []
    for model in models:
        for gpu in args.gpus:
            deps = [d for d in plan.deployments if d["gpu"] == gpu]
            step = max(1, sweeps.MAX_POINTS // max(1, len(deps)))
            for i in range(0, len(plan.workloads), step):
                t = sweeps.sweep(model, args.db, deps, plan.workloads[i : i + step])
                duck.append(t.add_column(0, "model", pa.array([model] * t.num_rows)))
    duck_t = pa.concat_tables(duck)
    duck_wall, duck_cpu = time.perf_counter() - t0, _cpu() - c0
    print(f"  duckdb: {duck_t.num_rows:,} rows in {duck_wall:.1f} s", flush=True)

    # Spark: one job over every model's partitions and the whole grid
    t0, c0 = time.perf_counter(), _cpu()
    spark = engine.session(spark_conf)
    start_s, start_cpu = time.perf_counter() - t0, _cpu() - c0 + _jvm_cpu(spark)
    print(f"  Spark session ({args.master}) started in {start_s:.1f} s wall, {start_cpu:.1f} s CPU", flush=True)
    t0, c0, j0 = time.perf_counter(), _cpu(), _jvm_cpu(spark)
    rows = engine.sweep(models, args.db, args.dataset, plan.deployments, plan.workloads, spark=spark)
    spark_wall, spark_cpu = time.perf_counter() - t0, _cpu() - c0 + _jvm_cpu(spark) - j0
    spark.stop()
    print(f"  spark: {rows.num_rows:,} rows in {spark_wall:.1f} s", flush=True)
    mismatches = parity.compare("sweep", duck_t, rows)
    for m in mismatches:
        print(m, file=sys.stderr)

    print(f"\n{points:,} points ({points / FULL_POINTS:.2%} of the 10M-point case), load {os.getloadavg()[0]:.1f}")
    print(f"rows {'equal' if not mismatches else 'DIFFER'} on both engines ({duck_t.num_rows:,} rows)")
    for name, wall, cpu in (("duckdb", duck_wall, duck_cpu), ("spark", spark_wall, spark_cpu)):
        print(
            f"{name:>7}: {wall:8.1f} s wall, {cpu:8.1f} s CPU, {wall / points * 1e6:8.1f} µs wall per point, "
            f"{cpu / points * 1e6:8.1f} µs CPU per point"
        )
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
