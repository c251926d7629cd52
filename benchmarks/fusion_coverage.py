"""Measured coverage and SOL of the 14 peer cases op by op and as the framework launches them
(issue 14): for every case of ``shared/data/peer_cases`` (benchmarks/peer_side_by_side.py sets
up its deployment and workloads), the prefill (TTFT) and the decode step (TPOT):

- **coverage before**: the share of the step's speed-of-light time whose kernels have an
  exact measurement in the corpus, joined op by op (``step_measured``: sol_of_measured_s /
  sol_s, envelope policy — the fastest correct row of any library);
- **coverage after**: the same share when the kernels are the ones the case's framework
  launches at its newest rule file (``step_kernel_measured``: merged QKV / gate_up / w13 GEMMs
  joined as one GEMM each, envelope policy);
- **SOL before / after**: ``op_sol`` summed (``step_sol``'s primitive steps) and
  ``step_kernel_sol.time_s``;
- and, for the decode steps, the SiLU + mul and the residual add / RMSNorm time before
  (``op_sol``, ops silu, mul of the FFN roles; add, rmsnorm) and after (``launched_kernels``
  whose ops are only those).

    PYTHONPATH=. python benchmarks/fusion_coverage.py --db STORE [--wheel aiconfigurator_core-….whl]

The store must hold the three models of the cases (Meta-Llama-3.1-8B, Qwen3-32B, DeepSeek-V3);
a store without a kernel corpus gets aiconfigurator-core's H200 and B200 tables imported from
``--wheel`` (or the installed package).  The rows the script adds are named ``peer-…`` and
replaced on every run (peer_side_by_side.prepare).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_side_by_side import DEFAULT_CASES, prepare, read_peers, short_case

from archsql import store

NEWEST = {"vllm": "0.11", "sglang": "0.5"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--wheel", type=Path, default=None, help="aiconfigurator-core wheel for the corpus import")
    args = parser.parse_args(argv)

    from archsql.kernel_corpus.storage import open_corpus

    con = store.connect(args.db, read_only=False)
    has_corpus = "kernel_corpus_sources" in {
        r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()
    }
    con.close()
    if not has_corpus:
        from archsql.kernel_corpus.aiconfigurator import import_aiconfigurator

        import_aiconfigurator(args.db, location=args.wheel, systems=["h200_sxm", "b200_sxm"])
    open_corpus(args.db).close()  # the corpus views over the current model views

    cases, _ = read_peers(args.cases)
    con = store.connect(args.db, read_only=False)
    models = prepare(con, cases)
    con.close()
    store.refresh_store(args.db)  # the derived rows of the cases' deployments: point queries read them
    from archsql.kernel_corpus.storage import connect_read_only

    con = connect_read_only(args.db)
    con.execute(
        "create or replace temp table keys (model varchar, deployment varchar, workload varchar, framework varchar, version varchar)"
    )
    rows = []
    for c in cases:
        for w in (c.prefill, c.decode):
            rows.append((models[c.model_id], c.deployment, w, c.framework, NEWEST[c.framework]))
    con.executemany("insert into keys values (?, ?, ?, ?, ?)", sorted(set(rows)))
    started = time.perf_counter()
    before = {
        (m, d, w): (sol, measured)
        for m, d, w, sol, measured in con.execute(
            "select s.model, s.deployment, s.workload, s.sol_s, s.sol_of_measured_s from step_measured as s"
            " inner join keys as k using (model, deployment, workload) where s.policy = 'envelope'"
        ).fetchall()
    }
    after = {
        (m, d, w): (sol, measured)
        for m, d, w, sol, measured in con.execute(
            "select s.model, s.deployment, s.workload, s.sol_s, s.sol_of_measured_s from step_kernel_measured as s"
            " inner join keys as k using (model, deployment, workload, framework, version) where s.policy = 'envelope'"
        ).fetchall()
    }
    classes_before = {
        (m, d, w): (a, b)
        for m, d, w, a, b in con.execute(
            "select o.model, o.deployment, o.workload,"
            " sum(o.time_s) filter (where o.op in ('silu', 'mul') and o.role in ('ffn', 'ffn_moe')),"
            " sum(o.time_s) filter (where o.op in ('add', 'rmsnorm'))"
            " from op_sol as o inner join (select distinct model, deployment, workload from keys) as k"
            " using (model, deployment, workload) group by all"
        ).fetchall()
    }
    classes_after = {
        (m, d, w): (a, b)
        for m, d, w, a, b in con.execute(
            "select l.model, l.deployment, l.workload,"
            " sum(l.time_s) filter (where list_has_all(['silu', 'mul'], l.ops)),"
            " sum(l.time_s) filter (where list_has_all(['add', 'rmsnorm'], l.ops))"
            " from launched_kernels as l inner join keys as k using (model, deployment, workload, framework, version)"
            " group by all"
        ).fetchall()
    }
    seconds = time.perf_counter() - started
    con.close()

    print("| case | step | framework | SOL op by op (ms) | SOL launched (ms) | coverage before | coverage after |")
    print("|---|---|---|--:|--:|--:|--:|")
    for c in cases:
        m = models[c.model_id]
        for step, w in (("prefill", c.prefill), ("decode", c.decode)):
            sol_b, meas_b = before[(m, c.deployment, w)]
            sol_a, meas_a = after[(m, c.deployment, w)]
            print(
                f"| {short_case(c)} | {step} | {c.framework} {NEWEST[c.framework]} | {sol_b * 1e3:,.2f} | {sol_a * 1e3:,.2f}"
                f" | {meas_b / sol_b:.1%} | {meas_a / sol_a:.1%} |"
            )
    print()
    print("| case | decode SiLU+mul before (ms) | after (ms) | add/RMSNorm before (ms) | after (ms) |")
    print("|---|--:|--:|--:|--:|")
    for c in cases:
        m = models[c.model_id]
        key = (m, c.deployment, c.decode)
        (sm_b, an_b), (sm_a, an_a) = classes_before[key], classes_after[key]
        print(
            f"| {short_case(c)} | {sm_b * 1e3:.3f} | {(sm_a or 0) * 1e3:.3f} | {an_b * 1e3:.3f} | {(an_a or 0) * 1e3:.3f} |"
        )
    print(f"\n(queries: {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
