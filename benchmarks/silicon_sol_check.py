"""Speed of light against measured serving runs: archsql's SOL TPOT for every row of
``shared/data/silicon/silicon_dev.csv`` it can express, counting the rows where SOL is slower
than the measured TPOT (a speed of light slower than a real run is a bug).

The mapping of a row to a model, GPU and layout is :mod:`archsql.silicon` (its docstring
states the rules).  All deployments and workloads are inserted once (one per distinct layout and one per
distinct (batch, context)); one query over ``step_sol`` answers every row.

    PYTHONPATH=. python benchmarks/silicon_sol_check.py [--db STORE] [--csv PATH] [--list] [--explain N]

``--db`` reuses (or builds, when missing) a store holding the catalog models the CSV needs;
the rows the script adds are named ``si-…`` and replaced on every run.  ``--list`` prints the
rows whose SOL exceeds the measured TPOT; ``--explain N`` breaks the N worst of them (by
SOL / measured) down by op class from ``op_sol``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from archsql import api, store
from archsql.silicon import norm_model, plan, prepare, store_facts

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "data" / "silicon" / "silicon_dev.csv"


def answer(con, questions: list[dict]) -> None:
    """SOL TPOT of every expressible row, in one query over step_sol."""
    keys = sorted({(q["layout"].model, q["layout"].name, q["workload"]) for q in questions if "sol_key" in q})
    con.execute("create or replace temp table si_keys (model varchar, deployment varchar, workload varchar)")
    con.executemany("insert into si_keys values (?, ?, ?)", keys)
    # fits: weights + caches + activations within the device's whole memory (no framework
    # reserve: TRT-LLM has no memory fraction in archsql's frameworks table)
    sol = {
        (m, d, w): (t, fits)
        for m, d, w, t, fits in con.execute(
            "select s.model, s.deployment, s.workload, s.time_s, m.total_bytes <= m.memory_bytes "
            "from step_sol as s inner join si_keys as k using (model, deployment, workload) "
            "inner join device_memory as m using (model, deployment, workload)"
        ).fetchall()
    }
    for q in questions:
        if "sol_key" in q:
            q["sol_s"], q["fits"] = sol[q["sol_key"]]


def breakdown(con, q: dict) -> str:
    """op_sol of one row's step grouped by role and op: where the SOL time goes."""
    model, dep, wl = q["sol_key"]
    rows = con.execute(
        "select role, op, any_value(math_dtype), any_value(bound), sum(flops), sum(bytes), sum(comm_bytes), "
        "sum(time_s) from op_sol where model = ? and deployment = ? and workload = ? "
        "group by role, op order by sum(time_s) desc limit 8",
        [model, dep, wl],
    ).fetchall()
    out = [f"    {'role':<10} {'op':<16} {'dtype':<6} {'bound':<8} {'GFLOP':>9} {'HBM GB':>8} {'link GB':>8} {'ms':>8}"]
    for role, op, dt, bound, f, b, c, t in rows:
        out.append(
            f"    {role:<10} {op:<16} {dt or '-':<6} {bound:<8} {f / 1e9:9.1f} {b / 1e9:8.3f} {c / 1e9:8.3f} {t * 1e3:8.3f}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="store to reuse (built with the needed models when missing)")
    parser.add_argument("--rebuild", action="store_true", help="re-evaluate the models into --db")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="silicon_dev.csv")
    parser.add_argument("--list", action="store_true", help="print every row whose SOL exceeds the measured TPOT")
    parser.add_argument("--explain", type=int, default=0, metavar="N", help="op breakdown of the N worst rows")
    parser.add_argument(
        "--as-recorded", action="store_true", help="take tp·ep layouts as recorded (no remap to ep GPUs)"
    )
    parser.add_argument("--family", help="only rows of this family (e.g. gpt-oss) for --list / --explain")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        parser.error(f"no measured runs at {args.csv} (--csv)")
    with args.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "silicon.duckdb"
        t0 = time.perf_counter()
        if args.rebuild or not db.is_file():
            # the catalog models the CSV names, matched by the same rule as the rows
            catalog = {m: m for m in api.catalog()}
            names = {norm_model(r["model_path"]) for r in rows}
            wanted = sorted(m for m in catalog if norm_model(m) in names)
            api.build(wanted, db=db)
            print(f"built {', '.join(wanted)}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        con = store.connect(db, read_only=False)
        ids, native, moe, domain = store_facts(con)
        questions = plan(rows, ids, native, moe, domain, remap=not args.as_recorded)
        t1 = time.perf_counter()
        rejected = prepare(con, questions)
        for q in questions:
            if "layout" not in q:
                continue
            lay = q["layout"]
            why = rejected.get((lay.name, None)) or rejected.get((lay.name, lay.model))
            if why:
                q["skip"] = f"layout archsql rejects: {why}"
            else:
                q["sol_key"] = (lay.model, lay.name, q["workload"])
        answer(con, questions)
        print(
            f"{len({q['layout'].name for q in questions if 'layout' in q})} deployments, "
            f"{len({q['workload'] for q in questions if 'workload' in q})} workloads, "
            f"query {time.perf_counter() - t1:.1f} s",
            file=sys.stderr,
        )
        report(con, questions, args)
        con.close()
    return 0


def report(con, questions: list[dict], args) -> None:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for q in questions:
        groups[(q["row"]["family"], q["row"]["backend"])].append(q)
    head = (
        f"{'family':<12} {'framework':<9} {'rows':>5} {'expressed':>9} {'SOL>meas':>8} {'of which fit':>12} "
        f"{'worst SOL/meas':>14}  worst row"
    )
    print(head)
    print("-" * len(head))
    total = defaultdict(int)
    for (family, backend), qs in sorted(groups.items()):
        done = [q for q in qs if "sol_s" in q]
        over = [q for q in done if q["sol_s"] * 1e3 > float(q["row"]["silicon_tpot_ms"])]
        worst = max(done, key=lambda q: q["sol_s"] * 1e3 / float(q["row"]["silicon_tpot_ms"]), default=None)
        ratio = worst["sol_s"] * 1e3 / float(worst["row"]["silicon_tpot_ms"]) if worst else float("nan")
        fit = [q for q in over if q["fits"]]
        print(
            f"{family:<12} {backend:<9} {len(qs):>5} {len(done):>9} {len(over):>8} {len(fit):>12} {ratio:>14.2f}  "
            + (worst["row"]["id"] if worst else "")
        )
        total["rows"] += len(qs)
        total["done"] += len(done)
        total["over"] += len(over)
        total["fit"] += len(fit)
    print("-" * len(head))
    print(f"{'all':<22} {total['rows']:>5} {total['done']:>9} {total['over']:>8} {total['fit']:>12}")
    remapped = [q for q in questions if q.get("remapped")]
    print(
        f"({len(remapped)} rows remapped from tp·ep GPUs to ep GPUs, {sum('sol_s' in q for q in remapped)} of them "
        "expressed; 'of which fit': SOL > measured on a deployment whose step fits in the device's memory — "
        "on one that does not, the layout as recorded cannot be what ran)"
    )
    skipped: dict[str, int] = defaultdict(int)
    for q in questions:
        if "skip" in q:
            skipped[q["skip"]] += 1
    print(f"\nskipped {sum(skipped.values())} rows:")
    for why, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"  {n:>4}  {why}")
    offending = [
        q
        for q in questions
        if "sol_s" in q
        and q["sol_s"] * 1e3 > float(q["row"]["silicon_tpot_ms"])
        and (args.family is None or q["row"]["family"] == args.family)
    ]
    offending.sort(key=lambda q: -q["sol_s"] * 1e3 / float(q["row"]["silicon_tpot_ms"]))
    if args.list:
        print(f"\nrows whose SOL TPOT exceeds the measured TPOT ({len(offending)}):")
        print(f"  {'id':<58} {'batch':>5} {'ctx':>6} {'SOL ms':>8} {'meas ms':>8} {'ratio':>6}  deployment")
        for q in offending:
            meas = float(q["row"]["silicon_tpot_ms"])
            print(
                f"  {q['row']['id']:<58} {q['batch']:>5} {q['context']:>6} {q['sol_s'] * 1e3:>8.2f} {meas:>8.2f} "
                f"{q['sol_s'] * 1e3 / meas:>6.2f}  {q['layout'].name}" + ("" if q["fits"] else " (does not fit)")
            )
    for q in offending[: args.explain]:
        meas = float(q["row"]["silicon_tpot_ms"])
        print(
            f"\n{q['row']['id']}: SOL {q['sol_s'] * 1e3:.2f} ms vs measured {meas:.2f} ms "
            f"(batch {q['batch']}, context {q['context']}, {q['layout'].name})"
        )
        print(breakdown(con, q))


if __name__ == "__main__":
    raise SystemExit(main())
