"""Measured serving runs (``shared/data/silicon/silicon_dev.csv``) as archsql questions: the
rules that map a row to a catalog model, a GPU and a deployment layout, shared by
``benchmarks/silicon_sol_check.py`` (speed of light against the measured TPOT) and
``benchmarks/bench_silicon.py`` (serving estimates against measured TTFT / TPOT).

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
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

PREFIX = "si-"

SYSTEMS = {
    "h100_sxm": "H100 SXM",
    "h200_sxm": "H200 SXM",
    "b200_sxm": "B200 (HGX/DGX B200)",
    "b300_sxm": "B300 (HGX B300)",
    "gb200": "GB200 (per GPU in NVL72)",
}
# backends with a frameworks row (archsql/defaults/frameworks.csv: the memory fraction a deployment
# served by it may fill); another backend's deployment has no memory default and is rejected
FRAMEWORKS = ("vllm", "sglang", "trtllm")
# the row's precision → the profile that stores it when the checkpoint does not already, and
# the matmul dtype
PRECISIONS = {"fp8": ("fp8", "fp8"), "fp4": ("nvfp4", "fp4")}


def _precision_of(scheme: str) -> str | None:
    """The precision class of a quant scheme (fp8_block → fp8, mxfp4/nvfp4 → fp4)."""
    return "fp8" if scheme.startswith("fp8") else "fp4" if scheme.endswith("fp4") else None


def norm_model(repo_id: str) -> str:
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
    by_name = {norm_model(hf): model for hf, model in catalog_ids.items()}
    out = []
    for r in rows:
        q = dict(row=r)
        model = by_name.get(norm_model(r["model_path"]))
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
            framework = r["backend"] if r["backend"] in FRAMEWORKS else None
            q["layout"] = Layout(model, gpu, tp, dp, pp, ep, moe_tp, profile, wdt, kv, framework)
            isl, osl = int(r["isl"]), int(r["osl"])
            q["batch"], q["context"] = concurrency, isl + osl // 2
            q["workload"] = f"{PREFIX}decode-b{concurrency}-c{isl + osl // 2}"
        out.append(q)
    return out


def store_facts(con) -> tuple[dict[str, str], dict[str, set[str]], set[str], dict[str, int]]:
    """What :func:`plan` needs from a store: catalog ids (hf_id → model), the precisions each
    model's checkpoint already stores weights in, the models with routed experts, and each
    GPU's scale-up domain."""
    ids = dict(con.execute("select hf_id, model from model_summary").fetchall())
    native: dict[str, set[str]] = defaultdict(set)
    for model, scheme in con.execute(
        "select distinct model, scheme from int_storage_bytes where profile = 'native' and part = 'data'"
    ).fetchall():
        if _precision_of(scheme):
            native[model].add(_precision_of(scheme))
    moe = {m for (m,) in con.execute("select distinct model from params_by_role where role = 'ffn_moe'").fetchall()}
    domain = {g: int(n) for g, n in con.execute("select gpu, scaleup_domain_gpus from gpus").fetchall() if n}
    return ids, native, moe, domain


def deployment_row(lay: Layout) -> dict:
    """The ``insert_deployments`` row of a layout."""
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
    return row


def prepare(con, questions: list[dict]) -> dict[str, str]:
    """Insert every layout and workload once; return archsql's objection to each layout it
    rejects (deployment_checks / parallel_fit_checks), by deployment name and model."""
    from archsql.store import insert_deployments, insert_rows

    for table in ("deployment_frameworks", "deployment_mesh", "deployments"):
        con.execute(f"delete from {table} where deployment like '{PREFIX}%'")
    con.execute(f"delete from workloads where workload like '{PREFIX}%'")
    layouts = {q["layout"] for q in questions if "layout" in q}
    # a layout's name leaves out the model: models on the same layout share the deployment
    deployments = list({lay.name: deployment_row(lay) for lay in sorted(layouts, key=lambda x: x.name)}.values())
    insert_deployments(con, deployments)
    workloads = {q["workload"]: (q["batch"], q["context"]) for q in questions if "workload" in q}
    insert_rows(
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
