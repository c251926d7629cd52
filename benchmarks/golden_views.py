"""Golden comparison of every view (a script, not a test) — issue 11's "no behaviour change".

``python benchmarks/golden_views.py export DIR [--db STORE]`` builds the full catalog (default
deployments and workloads) into a temp store (or reads ``--db``) and writes every view, whole,
as ``DIR/<view>.parquet`` with its rows in a canonical order (the non-float columns first,
then the floats).  ``python benchmarks/golden_views.py compare OLD NEW`` compares two such
exports view by view:

- integers, strings, booleans, lists: exact;
- floats: ``|a - b| <= 1e-12 · max(|a|, |b|)`` (both NULL or both NaN count as equal);
- a view present on one side only, a changed column list or row count: reported.

A view reshaped on purpose is exported in its old shape (``OLD_SHAPE``, with the reason).

Run ``export`` once at the commit a refactor starts from (``git worktree add /tmp/base HEAD``,
then ``PYTHONPATH=/tmp/base python benchmarks/golden_views.py export /tmp/golden-before``) and
again after it; ``compare`` exits 1 when any view differs.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

REL_TOL = 1e-12
SKIP = {"store_meta"}  # build time stamps

# Views whose shape a refactor changed on purpose, exported in their old shape from the new
# views so the values are still compared.  Issue 11 moved each parallel degree from a column
# of `deployments` to a `deployment_mesh` row; `int_deployment_degrees` pivots them back.
OLD_SHAPE = {
    "base_deployments": (
        "int_deployment_degrees",
        "select d.deployment, d.gpu, d.gpus, g.tp, g.dp, g.ep, g.moe_tp, g.pp, g.cp, d.cp_kind, d.nodes, "
        "d.weight_dtype, d.act_dtype, d.kv_dtype, d.usable_memory_fraction, d.weight_profile "
        "from base_deployments as d join int_deployment_degrees as g using (deployment)",
    ),
}


def _float(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_decimal(t)


def export(out: Path, db: Path | None) -> None:
    from archsql import api

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if db is None:
            db = Path(tmp) / "golden.duckdb"
            t0 = time.perf_counter()
            api.build(db=db)
            print(f"built the catalog in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        con = duckdb.connect(str(db), read_only=True)
        views = [
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = 'main' "
                "and table_type = 'VIEW' order by 1"
            ).fetchall()
        ]
        for view in views:
            if view in SKIP:
                continue
            t0 = time.perf_counter()
            source = f'"{view}"'
            if view in OLD_SHAPE and OLD_SHAPE[view][0] in views:
                source = f"({OLD_SHAPE[view][1]})"
            schema = con.sql(f"select * from {source} limit 0").to_arrow_table().schema
            keys = [f'"{f.name}"' for f in schema if not _float(f.type)]
            floats = [f'"{f.name}"' for f in schema if _float(f.type)]
            order = ", ".join([*keys, *floats])
            table = con.sql(f"select * from {source} order by {order}").to_arrow_table()
            pq.write_table(table, out / f"{view}.parquet")
            print(f"{view:40s} {table.num_rows:>9d} rows  {time.perf_counter() - t0:6.2f} s", file=sys.stderr)
        con.close()


def _equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= REL_TOL * max(abs(a), abs(b))
    return a == b


def compare(old: Path, new: Path) -> int:
    olds = {p.stem: p for p in old.glob("*.parquet")}
    news = {p.stem: p for p in new.glob("*.parquet")}
    bad = 0
    for name in sorted(olds.keys() - news.keys()):
        print(f"{name}: only in {old}")
        bad += 1
    for name in sorted(news.keys() - olds.keys()):
        print(f"{name}: only in {new} (new view, not compared)")
    for name in sorted(olds.keys() & news.keys()):
        a, b = pq.read_table(olds[name]), pq.read_table(news[name])
        if a.column_names != b.column_names:
            print(f"{name}: columns {a.column_names} -> {b.column_names}")
            bad += 1
            continue
        if a.num_rows != b.num_rows:
            print(f"{name}: {a.num_rows} -> {b.num_rows} rows")
            bad += 1
            continue
        diffs = 0
        for col in a.column_names:
            xs, ys = a.column(col).to_pylist(), b.column(col).to_pylist()
            for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                if not _equal(x, y):
                    if diffs < 5:
                        print(f"{name}: row {i} column {col}: {x!r} -> {y!r}")
                    diffs += 1
        if diffs:
            print(f"{name}: {diffs} differing values")
            bad += 1
    print(f"{len(olds.keys() & news.keys())} views compared, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("out", type=Path)
    e.add_argument("--db", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.cmd == "export":
        export(args.out, args.db)
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
