"""Point-query benchmark (not a test): one (model, deployment, workload) row of ``step_sol``
joined with ``device_memory``, as a user asks it.

* warm in-process: ``archsql.api.query`` called repeatedly in one process (each call opens
  the store through ``archsql.store.connect``, guard included), best and median of N;
  and the same query on one already-open connection;
* cold CLI: ``python -m archsql --db DB sql QUERY`` as a fresh process, best of N;
* build: ``archsql.api.build`` of the models into a temp store (evaluation, write and the
  derived tables), when ``--models`` is given instead of ``--db``.

Targets (issue 13) on 2 shared cores: warm < 20 ms, cold CLI < 0.5 s.  The in-repo baseline
is the figure measured on the commit before the derived tables (``BASELINE``, 4-model store
DeepSeek-V3 Meta-Llama-3.1-8B Qwen3-32B gpt-oss-120b); the ratio to it is printed so a
regression shows.

    PYTHONPATH=. python benchmarks/bench_point.py --db /tmp/store.duckdb
    PYTHONPATH=. python benchmarks/bench_point.py --models DeepSeek-V3 Meta-Llama-3.1-8B Qwen3-32B gpt-oss-120b
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POINT_SQL = """
select s.model, s.deployment, s.workload, s.time_s, s.tokens_per_s_per_gpu,
       m.total_bytes, m.fits, m.max_batch
from step_sol as s join device_memory as m using (model, deployment, workload)
where s.model = '{model}' and s.deployment = '{deployment}' and s.workload = '{workload}'
"""
TARGETS = {"warm": 0.020, "cold_cli": 0.5}
# measured before the derived tables (commit 8f9d55b, 4-model store, 2 shared cores)
BASELINE = {"warm": 5.1, "cold_cli": 7.2}


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _report(name: str, times: list[float]) -> bool:
    best, median = min(times), statistics.median(times)
    target = TARGETS.get(name)
    verdict = "" if target is None else (" [pass]" if best < target else " [FAIL]")
    ratio = f", {BASELINE[name] / best:.0f}x faster than baseline {BASELINE[name]} s" if name in BASELINE else ""
    print(f"{name:>16}: best {best * 1000:8.1f} ms, median {median * 1000:8.1f} ms{verdict}{ratio}")
    return target is None or best < target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an existing store (default: build --models into a temp store)")
    parser.add_argument("--models", nargs="+", default=["DeepSeek-V3", "Meta-Llama-3.1-8B"])
    parser.add_argument("--model", default="DeepSeek-V3")
    parser.add_argument("--deployment", default="8xH200-tp8-ep8-wfp8")
    parser.add_argument("--workload", default="decode_b64_c2k")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cli-repeat", type=int, default=3)
    args = parser.parse_args()

    from archsql import api
    from archsql.store import connect, freshness

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "point.duckdb"
            t = time.perf_counter()
            report = api.build(args.models, db=db)
            print(f"build {len(report.models)} models: {time.perf_counter() - t:.2f} s")
        sql = POINT_SQL.format(model=args.model, deployment=args.deployment, workload=args.workload)
        con = connect(db)
        print(f"store {db}: derived tables {'fresh' if freshness(con).fresh else 'STALE (live views)'}")
        rows = con.sql(sql).fetchall()
        if len(rows) != 1:
            print(f"the point query returned {len(rows)} rows, expected 1", file=sys.stderr)
            return 1
        ok = _report("open connection", _time(lambda: con.sql(sql).fetchall(), args.repeat))
        con.close()
        api.query(sql, db=db)  # imports and caches warm
        ok &= _report("warm", _time(lambda: api.query(sql, db=db), args.repeat))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        cmd = [sys.executable, "-m", "archsql", "--db", str(db), "sql", " ".join(sql.split()), "--format", "csv"]
        cli = _time(lambda: subprocess.run(cmd, check=True, capture_output=True, env=env), args.cli_repeat)
        ok &= _report("cold_cli", cli)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
