"""A point query from the command line loads only what it needs (issue 13: a cold CLI call
answers in under half a second, and most of a cold call is importing modules).

The ground truth is the interpreter's own module table after a real ``archsql sql`` call in
a fresh process: the spec library's sympy, the view checker's sqlglot, polars and the rich
progress bar and rich itself are loaded by the commands that use them (build, explain, sweep, table output),
never by a query answered as csv.  The timing itself is a benchmark
(benchmarks/bench_point.py), not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

POINT = (
    "select s.model, s.time_s, m.total_bytes from step_sol as s join device_memory as m "
    "using (model, deployment, workload) where s.model = 'Meta-Llama-3.1-8B' "
    "and s.deployment = '8xH200-tp8' and s.workload = 'decode_b64_c2k'"
)
# loaded by the commands that need them (rich: by table output), never by a query printed as csv
HEAVY = ("sympy", "sqlglot", "polars", "rich", "yaml", "archsql.specs", "archsql.evaluator")

_PROBE = """
import json, sys
from archsql.cli import cli
try:
    cli(["--db", sys.argv[1], "sql", sys.argv[2], "--format", "csv"], prog_name="archsql")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_a_csv_point_query_imports_no_heavy_module(store_of):
    db = store_of("Meta-Llama-3.1-8B")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(db), POINT],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    *answer, probe = done.stdout.strip().splitlines()
    result = json.loads(probe)
    assert result["code"] in (0, None), done.stderr
    assert answer[0] == "model,time_s,total_bytes" and answer[1].startswith("Meta-Llama-3.1-8B,")
    loaded = [m for m in result["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == [], f"a csv point query imported {loaded}"
