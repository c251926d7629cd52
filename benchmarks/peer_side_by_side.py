"""Side by side with peer estimators: archsql's figures for the 14 deployment cases of
``shared/data/peer_cases`` next to aiconfigurator 0.12 (SOL and SILICON), GenZ and llm-analysis.

The cases are read from the peers' ``reference_output.jsonl`` (one aiconfigurator SOL line per
case: model id, system, layout, batch per rank, isl/osl, quantisation).  For every case the
script inserts, through the store's parameter tables (``archsql.store.insert_deployments`` and
``insert_rows``), one deployment (GPU, layout as mesh degrees, weights as the checkpoint ships
them — the ``native`` profile — with the GEMM and KV dtypes aiconfigurator inferred, the serving
framework whose memory fraction applies) and three workloads, then reads every figure from the
views:

- weights per GPU: ``device_memory.weight_bytes``;
- KV per token per GPU: ``device_memory.kv_bytes`` of the max-batch workload divided by the
  tokens that device holds (batch per attention-DP rank × context; every cache of these three
  models grows per token, no window);
- TTFT: ``step_sol.time_s`` of the prefill of the whole batch (isl new tokens per request);
- TPOT: ``step_sol.time_s`` of one decode step of the whole batch at context isl + osl/2 (the
  mean context of the osl decode steps; aiconfigurator averages decode steps over the osl
  tokens, GenZ prices one step at context isl, llm-analysis one at isl + osl);
- max batch per rank: ``device_memory.max_batch_per_dp_rank`` of a decode step at context
  isl + osl (the longest a request gets, aiconfigurator's kv_seq_len) at the case's batch.

    PYTHONPATH=. python benchmarks/peer_side_by_side.py [--db STORE] [--out docs/peer_side_by_side.md]

Without ``--db`` a temporary store of the three models is built; with ``--db`` an existing store
is reused (built when missing; ``--rebuild`` re-evaluates the models).  The rows the script
adds are named ``peer-…`` and replaced on every run.  In ``--out``, everything from the line
``<!-- end of generated tables -->`` on (the hand-written explanations) is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from archsql import store
from archsql.api import build

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CASES = REPO.parent / "shared" / "data" / "peer_cases" / "reference_output.jsonl"
END_MARKER = "<!-- end of generated tables -->"
FLAG_OVER = 0.10  # |archsql / aiconfigurator SOL - 1| above which a row is flagged

# the peers' system names → archsql's gpus table
GPUS = {"h200": "H200 SXM", "b200": "B200 (HGX/DGX B200)"}
# aiconfigurator's quant names → archsql dtypes
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4"}
PREFIX = "peer-"


@dataclass(frozen=True)
class Case:
    case: str
    model_id: str
    system: str
    gpus: int
    tp: int
    dp: int
    ep: int
    moe_tp: int | None
    pp: int
    batch_per_rank: int
    global_batch: int
    isl: int
    osl: int
    weight_dtype: str
    kv_dtype: str
    framework: str

    @property
    def deployment(self) -> str:
        mesh = f"tp{self.tp}" + (f"-adp{self.dp}" if self.dp > 1 else "") + (f"-ep{self.ep}" if self.ep > 1 else "")
        return (
            f"{PREFIX}{self.gpus}x{self.system.upper()}-{mesh}-w{self.weight_dtype}-kv{self.kv_dtype}-{self.framework}"
        )

    @property
    def prefill(self) -> str:
        return f"{PREFIX}prefill-b{self.global_batch}-s{self.isl}"

    @property
    def decode(self) -> str:
        return f"{PREFIX}decode-b{self.global_batch}-c{self.decode_context}"

    @property
    def full(self) -> str:
        return f"{PREFIX}decode-b{self.global_batch}-c{self.full_context}"

    @property
    def decode_context(self) -> int:
        return self.isl + self.osl // 2

    @property
    def full_context(self) -> int:
        return self.isl + self.osl


def read_peers(path: Path) -> tuple[list[Case], dict[tuple[str, str], dict]]:
    """The cases (from aiconfigurator's SOL lines) and every peer line by (tool label, case)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    peers: dict[tuple[str, str], dict] = {}
    cases: list[Case] = []
    for d in lines:
        if d.get("kind") != "case":
            continue
        label = d["tool"] if d["tool"] != "aiconfigurator" else f"aic {d['mode']}"
        peers[(label, d["case"])] = d
        if label != "aic SOL":
            continue
        lay, quant = d["layout"], d["detail"]["quant"]
        tp, dp, pp = lay["tp"], lay["attention_dp"], lay["pp"]
        ep = lay["moe_ep"] or 1
        cases.append(
            Case(
                case=d["case"],
                model_id=d["model_id"],
                system=d["system"],
                gpus=d["num_gpus"],
                tp=tp,
                dp=dp,
                ep=ep,
                moe_tp=lay["moe_tp"],
                pp=pp,
                batch_per_rank=d["batch_per_rank"],
                global_batch=d["global_batch"],
                isl=d["isl"],
                osl=d["osl"],
                weight_dtype=DTYPES[quant["gemm"]],
                kv_dtype=DTYPES[quant["kvcache"]],
                framework=d["detail"]["backend"],
            )
        )
    return cases, peers


def prepare(con, cases: list[Case]) -> dict[str, str]:
    """Insert the cases' deployments and workloads (replacing earlier ``peer-`` rows); return
    the catalog model of each case's model id."""
    models = dict(con.execute("select hf_id, model from model_summary").fetchall())
    missing = sorted({c.model_id for c in cases} - set(models))
    if missing:
        raise SystemExit(f"the store has no model with hf_id {', '.join(missing)}")
    for table in ("deployment_frameworks", "deployment_mesh", "deployments"):
        con.execute(f"delete from {table} where deployment like '{PREFIX}%'")
    con.execute(f"delete from workloads where workload like '{PREFIX}%'")
    deployments: dict[str, dict] = {}
    workloads: dict[str, dict] = {}
    for c in cases:
        # a dense model's FFN follows tp; the MoE span (moe_tp × ep × pp) must cover every GPU
        moe_tp = c.moe_tp or c.gpus // (c.ep * c.pp)
        deployments[c.deployment] = {
            "deployment": c.deployment,
            "gpu": GPUS[c.system],
            "gpus": c.gpus,
            "cp_kind": "none",
            "weight_dtype": c.weight_dtype,
            "act_dtype": "bf16",
            "kv_dtype": c.kv_dtype,
            "weight_profile": "native",
            "framework": c.framework,
            "tp": c.tp,
            "dp": c.dp,
            "ep": c.ep,
            "moe_tp": moe_tp,
            "pp": c.pp,
        }
        workloads[c.prefill] = dict(phase="prefill", batch=c.global_batch, new_tokens=c.isl, context=c.isl)
        workloads[c.decode] = dict(phase="decode", batch=c.global_batch, new_tokens=1, context=c.decode_context)
        workloads[c.full] = dict(phase="decode", batch=c.global_batch, new_tokens=1, context=c.full_context)
    store.insert_deployments(con, list(deployments.values()))
    store.insert_rows(con, "workloads", [{"workload": k, **v} for k, v in workloads.items()])
    problems = con.execute(
        f"select deployment, problem from deployment_checks where deployment like '{PREFIX}%'"
    ).fetchall()
    if problems:
        raise SystemExit("deployments archsql rejects:\n" + "\n".join(f"  {d}: {p}" for d, p in problems))
    return models


def archsql_figures(con, cases: list[Case], models: dict[str, str]) -> dict[str, dict]:
    """Every case's figures, read from step_sol and device_memory in one query each."""
    con.execute("create or replace temp table peer_keys (model varchar, deployment varchar, workload varchar)")
    keys = {(models[c.model_id], c.deployment, w) for c in cases for w in (c.prefill, c.decode, c.full)}
    con.executemany("insert into peer_keys values (?, ?, ?)", sorted(keys))
    steps = {
        (m, d, w): (t, fits)
        for m, d, w, t, fits in con.execute(
            "select s.model, s.deployment, s.workload, s.time_s, s.fits from step_sol as s "
            "inner join peer_keys as k using (model, deployment, workload)"
        ).fetchall()
    }
    memory = {
        (m, d, w): row
        for m, d, w, *row in con.execute(
            "select m.model, m.deployment, m.workload, m.weight_bytes, m.kv_bytes, m.max_batch_per_dp_rank, "
            "m.limited_by, m.fits from device_memory as m inner join peer_keys as k using (model, deployment, workload)"
        ).fetchall()
    }
    # the same steps as the case's framework launches them, its newest rule file (step_kernel_sol)
    fused: dict[tuple, dict] = {}
    for m, d, w, framework, version, t in con.execute(
        "select s.model, s.deployment, s.workload, s.framework, s.version, s.time_s from step_kernel_sol as s "
        "inner join peer_keys as k using (model, deployment, workload)"
    ).fetchall():
        fused.setdefault((m, d, w, framework), {})[tuple(int(x) for x in version.split("."))] = t

    def newest(key: tuple) -> float | None:
        versions = fused.get(key)
        return versions[max(versions)] if versions else None

    out = {}
    for c in cases:
        m = models[c.model_id]
        ttft, ttft_fits = steps[(m, c.deployment, c.prefill)]
        ttft_fused = newest((m, c.deployment, c.prefill, c.framework))
        tpot_fused = newest((m, c.deployment, c.decode, c.framework))
        tpot, tpot_fits = steps[(m, c.deployment, c.decode)]
        weights, kv, max_batch, limited_by, full_fits = memory[(m, c.deployment, c.full)]
        out[c.case] = {
            "model": m,
            "deployment": c.deployment,
            "weights_bytes_per_gpu": weights,
            "kv_bytes_per_token_per_gpu": kv / (c.batch_per_rank * c.full_context),
            "ttft_ms": ttft * 1e3,
            "tpot_ms": tpot * 1e3,
            "ttft_fused_ms": None if ttft_fused is None else ttft_fused * 1e3,
            "tpot_fused_ms": None if tpot_fused is None else tpot_fused * 1e3,
            "max_batch_per_rank": max_batch,
            "fits": {
                "ttft_ms": ttft_fits,
                "tpot_ms": tpot_fits,
                "ttft_fused_ms": ttft_fits,
                "tpot_fused_ms": tpot_fits,
                "max_batch_per_rank": full_fits,
            },
            "limited_by": limited_by,
        }
    return out


QUANTITIES = (
    ("weights_bytes_per_gpu", "Weights per GPU (GB = 1e9 B)", 1e-9, "{:.2f}"),
    ("kv_bytes_per_token_per_gpu", "KV cache per token per GPU (bytes)", 1, "{:,.0f}"),
    ("ttft_ms", "TTFT: prefill of the whole batch (ms)", 1, "{:,.1f}"),
    ("tpot_ms", "TPOT: one decode step of the whole batch (ms)", 1, "{:.2f}"),
    ("max_batch_per_rank", "Max batch per attention-DP rank", 1, "{:,.0f}"),
    ("ttft_fused_ms", "TTFT with the framework's fused kernels (step_kernel_sol, newest rules; ms)", 1, "{:,.1f}"),
    ("tpot_fused_ms", "TPOT with the framework's fused kernels (step_kernel_sol, newest rules; ms)", 1, "{:.2f}"),
)
PEERS = ("aic SOL", "aic SILICON", "genz", "llm-analysis")


def _fmt(value, scale, fmt) -> str:
    return "–" if value is None else fmt.format(value * scale)


def short_case(c: Case) -> str:
    layout = f"ADP{c.dp}+EP{c.ep}" if c.dp > 1 else (f"TP{c.tp}+EP{c.ep}" if c.ep > 1 else f"TP{c.tp}")
    batch = f"b{c.batch_per_rank}/rank" if c.dp > 1 else f"b{c.batch_per_rank}"
    model = {"meta-llama": "Llama-3.1-8B", "Qwen": "Qwen3-32B", "deepseek-ai": "DeepSeek-V3"}.get(
        c.model_id.split("/")[0], c.model_id
    )
    return f"{model} {c.gpus}×{c.system.upper()} {layout} {batch}"


def render(cases: list[Case], ours: dict[str, dict], peers: dict, command: str) -> tuple[str, int]:
    flagged = 0
    lines = [
        "# archsql side by side with aiconfigurator, GenZ and llm-analysis",
        "",
        "Generated (tables only; the explanations below the tables are written by hand and kept) by",
        "",
        f"    {command}",
        "",
        "from `shared/data/peer_cases/reference_output.jsonl`; benchmarks/peer_side_by_side.py says",
        "how each figure is read from the views (device_memory, step_sol). Input 2048",
        "tokens, output 128 per request; weights as the checkpoint ships them (`native` profile:",
        "BF16 for Llama-3.1-8B and Qwen3-32B, FP8 128×128 blocks for DeepSeek-V3), KV cache in",
        "aiconfigurator's dtype (BF16; FP8 for DeepSeek-V3); memory fraction of the case's",
        "framework (vLLM for the dense models, SGLang for DeepSeek-V3). TPOT is one decode step of",
        "the whole batch at context isl + osl/2 = 2112; max batch is taken at context isl + osl =",
        "2176. Δ = archsql / aiconfigurator SOL − 1; ⚑ marks |Δ| > 10 %; `(oom)` marks a step",
        "whose memory does not fit (archsql `fits` = false, aiconfigurator status `oom`). GenZ's",
        "DeepSeek-V3 is its own GQA approximation and llm-analysis has no MLA (see the peers'",
        "notes): their DeepSeek figures are not like for like.",
        "",
    ]
    for key, title, scale, fmt in QUANTITIES:
        lines += [f"## {title}", ""]
        lines.append("| case | archsql | aic SOL | Δ | | aic SILICON | GenZ | llm-analysis |")
        lines.append("|---|--:|--:|--:|:-:|--:|--:|--:|")
        for c in cases:
            mine = ours[c.case]
            value = mine[key]
            cell = _fmt(value, scale, fmt)
            if key in mine["fits"] and not mine["fits"][key]:
                cell += " (oom)"
            cells = [cell]
            peer_key = key.replace("_fused", "")  # a fused step is compared with the peers' step
            ref = peers.get(("aic SOL", c.case), {}).get(peer_key)
            if ref and value is not None:
                delta = value / ref - 1
                flag = "⚑" if abs(delta) > FLAG_OVER else ""
                flagged += bool(flag)
                cells += [_fmt(ref, scale, fmt), f"{delta:+.0%}", flag]
            else:
                cells += [_fmt(ref, scale, fmt), "–", ""]
            for label in PEERS[1:]:
                d = peers.get((label, c.case), {})
                v = _fmt(d.get(peer_key), scale, fmt)
                if d.get("status") == "oom" and peer_key in ("ttft_ms", "tpot_ms"):
                    v += " (oom)"
                cells.append(v)
            if peers.get(("aic SOL", c.case), {}).get("status") == "oom" and peer_key in ("ttft_ms", "tpot_ms"):
                cells[1] += " (oom)"
            lines.append(f"| {short_case(c)} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(
        f"{flagged} of {len(cases) * len(QUANTITIES)} figures differ from aiconfigurator SOL by more than 10 %."
    )
    lines.append("")
    return "\n".join(lines), flagged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="store to reuse (built with the three models when missing)")
    parser.add_argument("--rebuild", action="store_true", help="re-evaluate the models into --db")
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="the peers' reference_output.jsonl")
    parser.add_argument("--out", type=Path, help="markdown file to write (default: print)")
    args = parser.parse_args(argv)
    if not args.cases.is_file():
        parser.error(f"no peer cases at {args.cases} (--cases)")
    cases, peers = read_peers(args.cases)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "peers.duckdb"
        con = None
        if args.rebuild or not db.is_file():
            from archsql import api

            wanted = sorted({m for m in api.catalog() for c in cases if c.model_id.endswith("/" + m)})
            t0 = time.perf_counter()
            build(wanted, db=db)
            print(f"built {', '.join(wanted)} into {db}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        con = store.connect(db, read_only=False)
        t0 = time.perf_counter()
        models = prepare(con, cases)
        ours = archsql_figures(con, cases, models)
        con.close()
        print(f"queried {len(cases)} cases: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    command = "PYTHONPATH=. python benchmarks/peer_side_by_side.py" + (f" --out {args.out}" if args.out else "")
    text, flagged = render(cases, ours, peers, command)
    if args.out is None:
        print(text)
        return 0
    kept = ""
    if args.out.is_file():
        old = args.out.read_text()
        if END_MARKER in old:
            kept = old[old.index(END_MARKER) + len(END_MARKER) :].lstrip("\n")
    args.out.write_text(text + "\n" + END_MARKER + "\n\n" + kept)
    print(f"wrote {args.out} ({flagged} figures over 10 % from aiconfigurator SOL)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
