"""Checkpoint reconciliation time (a script, not a test): ``PYTHONPATH=. python benchmarks/bench_reconcile.py``
from the repository root.

Takes the catalog model with the most checkpoint tensors (default: the largest meta inventory, Kimi-K2-Instruct:
139,583 tensors, FP8 weights with their ``weight_scale_inv`` siblings), builds its synthetic header the way
tests/test_reconciliation.py does (transformers' on-disk names and shapes from the meta inventory, disk dtypes), and
times, best of ``--repeat``:

- ``evaluate``: the spec evaluated once (tables + storage_tensors);
- ``store``: the model's tables and the checkpoint header written to a DuckDB store, views created;
- ``reconcile``: ``checkpoint_reconciliation`` (every spec tensor expanded over layers and experts, joined with every
  file tensor by canonical name) and ``checkpoint_totals`` queried, the errors built;
- ``validate``: ``archsql.publish_check.validate(model, header)`` end to end (all of the above).

Reports the times and exits 1 when the header does not reconcile with difference 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb


def best(fn, repeat: int):
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="catalog model (default: the one with most inventory tensors)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from archsql.evaluator import evaluate
    from archsql.publish_check import reconciliation_findings, validate
    from archsql.store import connect, write_checkpoint, write_store
    from tests.test_reconciliation import header_table, inventory, inventory_models, synthetic_tensors

    models = [args.model] if args.model else inventory_models()
    sizes = {m: inventory(m)["num_checkpoint_tensors"] for m in models}
    model = max(sizes, key=sizes.get)
    t0 = time.perf_counter()
    header = header_table(synthetic_tensors(inventory(model)), f"synthetic:{model}")
    built = time.perf_counter() - t0
    print(f"{model}: synthetic header of {header.num_rows:,} tensors built in {built:.2f} s")

    t_eval, analysis = best(lambda: evaluate(model), args.repeat)
    rows = analysis.tables["storage_tensors"].num_rows

    def store():
        folder = tempfile.mkdtemp(prefix="archsql-bench-")
        db = Path(folder) / "s.duckdb"
        write_store(db, analysis.tables)
        return db, write_checkpoint(db, header, model=model)

    t_store, (db, checkpoint) = best(store, args.repeat)

    def reconcile():
        con = connect(db)
        try:
            bad = con.execute(
                "select status, canonical_name, spec_name, file_name, file, uid, tensor, part, scheme, rule, "
                "expected_dtype, actual_dtype, expected_shape, actual_shape, expected_elements, actual_elements, "
                "expected_bytes, actual_bytes from checkpoint_reconciliation where checkpoint = ? and status != 'ok'",
                [checkpoint],
            ).fetchall()
            totals = con.execute(
                "select file_tensors, spec_tensors, expected_bytes, actual_bytes from checkpoint_totals "
                "where checkpoint = ?",
                [checkpoint],
            ).fetchone()
            return reconciliation_findings(bad, totals, checkpoint, f"{model}.yaml"), totals
        finally:
            con.close()

    t_rec, (errors, totals) = best(reconcile, args.repeat)
    t_val, val_errors = best(lambda: validate(model, header), args.repeat)
    con = duckdb.connect(str(db), read_only=True)
    (expanded,) = con.execute("select count(*) from int_spec_tensors where model = ?", [model]).fetchone()
    con.close()

    print(f"  storage_tensors rows (templates): {rows:,}; expanded spec tensors: {expanded:,}")
    print(
        f"  file tensors {totals[0]:,}, spec tensors {totals[1]:,}, bytes {totals[3]:,} (diff {totals[3] - totals[2]})"
    )
    print(f"  evaluate   {t_eval:6.2f} s")
    print(f"  store      {t_store:6.2f} s  (tables + header + views)")
    print(f"  reconcile  {t_rec:6.2f} s  (checkpoint_reconciliation + checkpoint_totals, errors built)")
    print(f"  validate   {t_val:6.2f} s  (end to end)")
    ok = not errors and not val_errors
    print("  reconciled with difference 0" if ok else f"  NOT reconciled: {len(errors) or len(val_errors)} errors")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
