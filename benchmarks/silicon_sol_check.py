"""Speed of light against measured serving runs: archsql's SOL TPOT for every row of
``shared/data/silicon/silicon_dev.csv`` it can express, counting the rows where SOL is slower
than the measured TPOT (a speed of light slower than a real run is a bug).

How a row becomes an archsql question (the rules, each stated once here):

- **model**: the row's Hugging Face id matched to a catalog model's ``hf_id`` by its repo name,
  lower-cased, without a ``Meta-`` prefix and without ``-Instruct``, ``-FP8``, ``-NVFP4``
  suffixes (``nvidia/Llama-3.1-8B-Instruct-FP8`` → Meta-Llama-3.1-8B); no match: skipped.
- **GPU**: the system name (``h200_sxm``, ``gb200``, …) → a row of archsql's gpus table
  (:data:`SYSTEMS`); none: skipped.
- **weights**: the row's precision picks the weight profile and the matmul dtype — ``fp8``
  (GEMM fp8 or fp8_block): the ``native`` profile when the checkpoint already stores weights
  in an FP8 scheme (DeepSeek-V3/R1's 128×128 blocks), else the ``fp8`` profile, matmuls in
  fp8; ``fp4`` (nvfp4): ``native`` when the checkpoint already stores 4-bit weights (gpt-oss:
  MXFP4 experts, BF16 attention), else the ``nvfp4`` profile, matmuls in fp4; no precision
  recorded: ``native``, matmuls in bf16.
- **KV cache**: not recorded; fp8 on fp8/fp4 rows, bf16 otherwise — the smaller plausible
  dtype, so that the SOL stays a lower bound.
- **layout**: tp, pp, attention_dp (blank or 0 → 1), moe_tp and moe_ep (blank or 0 → what
  the MoE span needs: moe_tp = GPUs / (ep × pp)) are the deployment's mesh degrees tp, pp,
  dp, moe_tp, ep on tp × attention_dp × pp GPUs; a model without routed experts takes ep 1
  and moe_tp = tp × attention_dp whatever the row records (the MoE span sizes nothing there) (nodes: archsql's default, the GPU's
  scale-up domain).  **Remap**: some rows record tp × attention_dp = t·e GPUs with moe_tp = t,
  moe_ep = e > 1 for a run its own name calls ``tp{t}_ep{e}`` (``…_c128_tp8_ep8_1998`` records
  tp_size 64, moe_tp 8, moe_ep 8): the recorded tp_size is tp × ep, the run used t GPUs.  Such a
  row — named so, or unnamed with t = e and t·e GPUs beyond one scale-up domain of its system
  (a multi-node layout at a single-node sweep's concurrencies) — is mapped to tp t (attention_dp
  t when the row's attention_dp holds the product), ep e, moe_tp t / e (``--as-recorded`` keeps
  the recorded degrees).  A layout archsql rejects (``deployment_checks``,
  ``parallel_fit_checks``) is skipped with archsql's reason.  Rows the CSV flags
  ``aic_comparable = False`` because the client concurrency is not batch × attention_dp
  (replicas or an unrecorded flag) are skipped: the batch one deployment sees is unknown.
- **step**: one decode step of the whole deployment with the row's concurrency as the batch
  (batch_size per attention-DP rank × attention_dp), one new token per request, at context
  isl + osl/2 (the mean context over the osl decode steps, rounded down).  SOL TPOT is
  ``step_sol.time_s``; the measured TPOT is ``silicon_tpot_ms``.

All deployments and workloads are inserted once (one per distinct layout and one per
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
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from archsql import api, store

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "data" / "silicon" / "silicon_dev.csv"
PREFIX = "si-"

SYSTEMS = {
    "h100_sxm": "H100 SXM",
    "h200_sxm": "H200 SXM",
    "b200_sxm": "B200 (HGX/DGX B200)",
    "b300_sxm": "B300 (HGX B300)",
    "gb200": "GB200 (per GPU in NVL72)",
}
# the row's precision → the profile that stores it when the checkpoint does not already, and
# the matmul dtype
PRECISIONS = {"fp8": ("fp8", "fp8"), "fp4": ("nvfp4", "fp4")}


def _precision_of(scheme: str) -> str | None:
    """The precision class of a quant scheme (fp8_block → fp8, mxfp4/nvfp4 → fp4)."""
    return "fp8" if scheme.startswith("fp8") else "fp4" if scheme.endswith("fp4") else None


def _norm(repo_id: str) -> str:
    name = repo_id.split("/")[-1].lower()
    name = re.sub(r"^meta-", "", name)
    return re.sub(r"(-instruct|-fp8|-nvfp4)+$", "", name)


def _num(value: str) -> int | None:
    return None if value in ("", None) else int(float(value))


@dataclass(frozen=True)
class Layout:
    model: str
    gpu: str
    tp: int
    dp: int
    pp: int
    ep: int
    moe_tp: int
    profile: str
    weight_dtype: str
    kv_dtype: str
    framework: str | None

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def name(self) -> str:
        gpu = self.gpu.split()[0]
        return (
            f"{PREFIX}{self.gpus}x{gpu}-tp{self.tp}-dp{self.dp}-pp{self.pp}-ep{self.ep}-mtp{self.moe_tp}"
            f"-{self.profile}-w{self.weight_dtype}-kv{self.kv_dtype}-{self.framework or 'none'}"
        )


def plan(
    rows: list[dict],
    catalog_ids: dict[str, str],
    native: dict[str, set[str]],
    moe: set[str],
    domain: dict[str, int],
    remap: bool = True,
) -> list[dict]:
    """Each CSV row with its archsql question (model, layout, workload) or its skip reason;
    ``native``: the precisions each model's checkpoint already stores weights in; ``moe``: the
    models with routed experts."""
    by_name = {_norm(hf): model for hf, model in catalog_ids.items()}
    out = []
    for r in rows:
        q = dict(row=r)
        model = by_name.get(_norm(r["model_path"]))
        gpu = SYSTEMS.get(r["system"])
        concurrency = _num(r["silicon_concurrency"])
        if model is None:
            q["skip"] = f"model {r['model_path']} not in the catalog"
        elif gpu is None:
            q["skip"] = f"system {r['system']} not in archsql's gpus table"
        elif r["aic_comparable"] != "True":
            q["skip"] = "CSV flags it not comparable: " + r["skip_reason"].split(";")[0].split(":")[0]
        elif concurrency is None:
            q["skip"] = "concurrency missing"
        else:
            tp, pp = _num(r["tp_size"]) or 1, _num(r["pp_size"]) or 1
            dp = _num(r["attention_dp_size"]) or 1
            ep = _num(r["moe_ep_size"]) or 1
            moe_tp = _num(r["moe_tp_size"]) or max(1, tp * dp // ep)
            named = re.search(r"_tp(\d+)(?:_0)?_ep(\d+)", r["id"])
            if remap and ep > 1 and tp * dp == moe_tp * ep and moe_tp > 1:
                # recorded as tp·ep GPUs: the run used moe_tp GPUs, attention tp (or DP) moe_tp, EP ep
                said = named is not None and (int(named[1]), int(named[2])) == (moe_tp, ep) and moe_tp != tp * dp
                multinode = named is None and moe_tp == ep and tp * dp > domain.get(gpu, tp * dp)
                if said or multinode:
                    tp, dp, moe_tp = (moe_tp, 1, moe_tp // ep) if tp > 1 else (1, moe_tp, moe_tp // ep)
                    q["remapped"] = True
            if model not in moe:  # no routed experts: the recorded MoE degrees size nothing
                ep, moe_tp = 1, tp * dp
            precision = r["precision"]
            if precision in PRECISIONS:
                profile, wdt = PRECISIONS[precision]
                profile, kv = ("native" if precision in native.get(model, ()) else profile), "fp8"
            else:
                profile, wdt, kv = "native", "bf16", "bf16"
            framework = r["backend"] if r["backend"] in ("vllm", "sglang") else None
            q["layout"] = Layout(model, gpu, tp, dp, pp, ep, moe_tp, profile, wdt, kv, framework)
            isl, osl = int(r["isl"]), int(r["osl"])
            q["batch"], q["context"] = concurrency, isl + osl // 2
            q["workload"] = f"{PREFIX}decode-b{concurrency}-c{isl + osl // 2}"
        out.append(q)
    return out


def prepare(con, questions: list[dict]) -> dict[str, str]:
    """Insert every layout and workload once; return archsql's objection to each layout it
    rejects (deployment_checks / parallel_fit_checks), by deployment name and model."""
    for table in ("deployment_frameworks", "deployment_mesh", "deployments"):
        con.execute(f"delete from {table} where deployment like '{PREFIX}%'")
    con.execute(f"delete from workloads where workload like '{PREFIX}%'")
    layouts = {q["layout"] for q in questions if "layout" in q}
    deployments = []
    for lay in sorted(layouts, key=lambda x: x.name):
        if lay.name in {d["deployment"] for d in deployments}:
            continue
        row = dict(
            deployment=lay.name,
            gpu=lay.gpu,
            gpus=lay.gpus,
            cp_kind="none",
            weight_dtype=lay.weight_dtype,
            act_dtype="bf16",
            kv_dtype=lay.kv_dtype,
            weight_profile=lay.profile,
            tp=lay.tp,
            dp=lay.dp,
            ep=lay.ep,
            moe_tp=lay.moe_tp,
            pp=lay.pp,
        )
        if lay.framework:
            row["framework"] = lay.framework
        deployments.append(row)
    store.insert_deployments(con, deployments)
    workloads = {q["workload"]: (q["batch"], q["context"]) for q in questions if "workload" in q}
    store.insert_rows(
        con,
        "workloads",
        [dict(workload=w, phase="decode", batch=b, new_tokens=1, context=c) for w, (b, c) in sorted(workloads.items())],
    )
    rejected = {}
    for dep, problem in con.execute(
        f"select deployment, problem from deployment_checks where deployment like '{PREFIX}%'"
    ).fetchall():
        rejected.setdefault((dep, None), problem)
    for model, dep, problem in con.execute(
        f"select model, deployment, problem from parallel_fit_checks where deployment like '{PREFIX}%'"
    ).fetchall():
        rejected.setdefault((dep, model), problem)
    return rejected


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
            names = {_norm(r["model_path"]) for r in rows}
            wanted = sorted(m for m in catalog if _norm(m) in names)
            api.build(wanted, db=db)
            print(f"built {', '.join(wanted)}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        con = store.connect(db, read_only=False)
        ids = dict(con.execute("select hf_id, model from model_summary").fetchall())
        native: dict[str, set[str]] = defaultdict(set)
        for model, scheme in con.execute(
            "select distinct model, scheme from int_storage_bytes where profile = 'native' and part = 'data'"
        ).fetchall():
            if _precision_of(scheme):
                native[model].add(_precision_of(scheme))
        moe = {m for (m,) in con.execute("select distinct model from params_by_role where role = 'ffn_moe'").fetchall()}
        domain = {g: int(n) for g, n in con.execute("select gpu, scaleup_domain_gpus from gpus").fetchall() if n}
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
