"""Point-query benchmark (not a test): one (model, deployment, workload) row of ``step_sol``
joined with ``device_memory``, as a user asks it.

* warm in-process: ``archsql.api.query`` called repeatedly in one process (each call on the
  read-only connection the process holds while the store file is unchanged,
  ``archsql.store_hold``: the file's identity checked, the query typed and run), best and
  median of N; ``reopen``: the same with holding off (``ARCHSQL_QUERY_HOLD_S=0``: each call
  opens the store, checks the derived tables' fingerprint and closes it); and the same query
  on one already-open connection;
* cold CLI: ``python -m archsql --db DB sql QUERY`` as a fresh process, best of N;
* build: ``archsql.api.build`` of the models into a temp store (evaluation, write and the
  derived tables), when ``--models`` is given instead of ``--db``.

Targets (issue 13) on 2 shared cores: warm < 20 ms, cold CLI < 0.5 s; ``catalog_memory``
(``device_memory`` of every model × deployment × workload of the store, summed) < 2 s.
Each figure is printed with its ratio to benchmarks/baselines/bench_point.json (wall, and
CPU time, which moves less with the machine's load: benchmarks/baseline.py); ``--record``
writes the figures as the new baseline.

    PYTHONPATH=. python -m archsql build --db /tmp/perf/cat.duckdb     # once: the full catalog
    PYTHONPATH=. python benchmarks/bench_point.py --db /tmp/perf/cat.duckdb [--record]
    PYTHONPATH=. python benchmarks/bench_point.py --models DeepSeek-V3 Meta-Llama-3.1-8B Qwen3-32B gpt-oss-120b
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from baseline import describe_baseline, record, report, timed

POINT_SQL = """
select s.model, s.deployment, s.workload, s.time_s, s.tokens_per_s_per_gpu,
       m.total_bytes, m.fits, m.max_batch
from step_sol as s join device_memory as m using (model, deployment, workload)
where s.model = '{model}' and s.deployment = '{deployment}' and s.workload = '{workload}'
"""
BENCH = "bench_point"
TARGETS = {"warm": 0.020, "cold_cli": 0.5, "catalog_memory": 2.0}
CATALOG_MEMORY_SQL = "select count(*), sum(total_bytes) from device_memory"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an existing store (default: build --models into a temp store)")
    parser.add_argument("--models", nargs="+", default=["DeepSeek-V3", "Meta-Llama-3.1-8B"])
    parser.add_argument("--model", default="DeepSeek-V3")
    parser.add_argument("--deployment", default="8xH200-tp8-ep8-wfp8")
    parser.add_argument("--workload", default="decode_b64_c2k")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cli-repeat", type=int, default=5)
    parser.add_argument("--record", action="store_true", help="write these figures as the new baseline")
    parser.add_argument("--note", default="", help="with --record: what the baseline is (commit, change)")
    args = parser.parse_args()

    from archsql import api, store_hold
    from archsql.store import connect, freshness

    describe_baseline(BENCH)
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "point.duckdb"
            t = time.perf_counter()
            built = api.build(args.models, db=db)
            print(f"build {len(built.models)} models: {time.perf_counter() - t:.2f} s")
        sql = POINT_SQL.format(model=args.model, deployment=args.deployment, workload=args.workload)
        con = connect(db)
        (models,) = con.execute("select count(*) from models").fetchone()
        print(
            f"store {db} ({models} models): derived tables {'fresh' if freshness(con).fresh else 'STALE (live views)'}"
        )
        rows = con.sql(sql).fetchall()
        if len(rows) != 1:
            print(f"the point query returned {len(rows)} rows, expected 1", file=sys.stderr)
            return 1
        ok = True
        timings = {"open_connection": timed(lambda: con.sql(sql).fetchall(), args.repeat)}
        con.close()
        api.query(sql, db=db)  # imports and caches warm
        timings["warm"] = timed(lambda: api.query(sql, db=db), args.repeat)
        hold = os.environ.get(store_hold.HOLD_ENV)
        os.environ[store_hold.HOLD_ENV] = "0"  # each call opens the store
        try:
            timings["reopen"] = timed(lambda: api.query(sql, db=db), max(1, args.repeat // 2))
        finally:
            os.environ.pop(store_hold.HOLD_ENV)
            if hold is not None:
                os.environ[store_hold.HOLD_ENV] = hold
        timings["catalog_memory"] = timed(lambda: api.query(CATALOG_MEMORY_SQL, db=db), max(1, args.repeat // 4))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        cmd = [sys.executable, "-m", "archsql", "--db", str(db), "sql", " ".join(sql.split()), "--format", "csv"]
        timings["cold_cli"] = timed(
            lambda: subprocess.run(cmd, check=True, capture_output=True, env=env), args.cli_repeat, children=True
        )
        for name, timing in timings.items():
            ok &= report(BENCH, name, timing, TARGETS.get(name))
            figures[name] = timing.figures()
        if args.record:
            store = f"{db if args.db else 'temp store: ' + ' '.join(args.models)} ({models} models)"
            print(f"recorded {record(BENCH, figures, store, args.note)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
