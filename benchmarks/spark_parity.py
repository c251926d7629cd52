"""Golden parity over a whole store (not a test): every view's rows on Spark local mode
against DuckDB's, for the full catalog × default deployments × workloads.

``tests/test_spark.py`` runs the same comparison on a representative store (one model per
family); this script runs it on any store — the full catalog is minutes of Spark time.

    PYTHONPATH=. python -m archsql build --db /tmp/perf/cat.duckdb     # once: the full catalog
    PYTHONPATH=. python benchmarks/spark_parity.py --db /tmp/perf/cat.duckdb --dataset /tmp/perf/fleet

Prints one line per view that differs (none: every view equal) and the times of each part.
Exit status 1 when a view differs or fails on Spark.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from archsql.spark import parity
from archsql.spark.dataset import export_dataset, read_manifest
from archsql.spark.engine import create_views, register_tables, session


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--dataset", required=True, type=Path)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    export_dataset(args.dataset, args.db)
    print(f"export: {time.perf_counter() - t0:.1f} s", flush=True)
    spark = session(
        {
            "spark.master": args.master,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "4g",
            "spark.ui.showConsoleProgress": "false",
        }
    )
    manifest = read_manifest(args.dataset)
    t0 = time.perf_counter()
    register_tables(spark, args.dataset, manifest)
    order = create_views(
        spark, manifest, materialize=True, progress=lambda name, i, n: print(f"  {i}/{n} {name}", flush=True)
    )
    print(f"spark: {len(order)} views in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    differ = 0
    rows = 0
    with tempfile.TemporaryDirectory() as work:
        for _name, n, mismatches in parity.compare_views(spark, args.db, order, work):
            rows += n
            differ += bool(mismatches)
            for m in mismatches:
                print(m, flush=True)
    print(f"compared (Spark's rows written, DuckDB's computed): {time.perf_counter() - t0:.1f} s", flush=True)
    print(f"{len(order) - differ} of {len(order)} views equal ({rows:,} rows compared)")
    spark.stop()
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
