"""Sweeps: a grid of deployments × workloads answered by the SOL views in one query.

The grid is written into the store's parameter tables inside a transaction that is rolled
back afterwards, so a sweep never changes the store; the views do all the arithmetic.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from archsql.errors import QueryError

SWEEP_SQL = """
select
    s.deployment, s.gpu, s.gpus, n.nodes, d.tp, d.dp, d.ep, d.moe_tp, d.pp, d.cp, d.cp_kind,
    d.weight_dtype, d.weight_profile, d.kv_dtype,
    s.workload, s.phase, s.batch, s.new_tokens, s.context,
    s.time_s, s.compute_s, s.memory_s, s.comm_s, s.tokens_per_s, s.tokens_per_s_per_gpu,
    s.new_tokens / nullif(s.time_s, 0) as tokens_per_s_per_user,
    m.weight_bytes, m.kv_bytes, m.activation_bytes, m.fits, m.shortfall_bytes, m.max_batch, m.limited_by,
    s.beyond_max_context,
    p.problems as layout_problems
from step_sol as s
join device_memory as m using (model, deployment, workload)
join deployments as d using (deployment)
join int_deployment_mesh as n using (deployment)
left join (
    select model, deployment, string_agg(problem, '; ' order by problem) as problems
    from parallel_fit_checks
    where rule in ('ulysses heads', 'pipeline stages')
    group by model, deployment
) as p using (model, deployment)
where s.model = ? and s.deployment like 'sweep:%' and s.workload like 'sweep:%'
order by s.deployment, s.workload
"""


# the deployments columns of a grid row, in order
DEPLOYMENT_COLUMNS = (
    "deployment",
    "gpu",
    "gpus",
    "tp",
    "dp",
    "ep",
    "moe_tp",
    "pp",
    "weight_dtype",
    "act_dtype",
    "kv_dtype",
    "usable_memory_fraction",
    "weight_profile",
    "cp",
    "cp_kind",
)
# weight dtype of a sweep → the precision profile its weights are stored in
WEIGHT_PROFILES = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "nvfp4"}


def grid(
    gpus: Sequence[str],
    counts: Sequence[int],
    tp: Sequence[int],
    ep: Sequence[int],
    batch: Sequence[int],
    context: Sequence[int],
    weights: Sequence[str] = ("bf16",),
    kv: Sequence[str] = ("bf16",),
    phase: str = "decode",
    usable_memory_fraction: float = 0.9,
    *,
    cp: Sequence[int] = (1,),
    cp_kinds: Sequence[str] = ("ring",),
    pp: Sequence[int] = (1,),
) -> tuple[list[tuple], list[tuple]]:
    """Deployment and workload rows of a sweep.  Attention runs tp × cp × dp × pp = GPUs (dp
    is what the others leave), MoE ep × moe_tp × pp = GPUs; combinations that do not divide
    are skipped.  Every cp > 1 is tried with each of ``cp_kinds`` (ulysses, ring)."""
    deployments = []
    for gpu, n, t, c, p, e, w, k in itertools.product(gpus, counts, tp, cp, pp, ep, weights, kv):
        if n % (t * c * p) or n % (e * p):
            continue
        for kind in cp_kinds if c > 1 else ("none",):
            ctx = f"-cp{c}-{kind}" if c > 1 else ""
            stages = f"-pp{p}" if p > 1 else ""
            dp, moe_tp = n // (t * c * p), n // (e * p)
            name = f"sweep:{n}x{gpu}:tp{t}{ctx}-dp{dp}-ep{e}{stages}-w{w}-kv{k}"
            profile = WEIGHT_PROFILES.get(w, w)
            row = (name, gpu, n, t, dp, e, moe_tp, p, w, "bf16", k, usable_memory_fraction, profile, c, kind)
            deployments.append(row)
    workloads = [
        (f"sweep:{phase}:b{b}:c{c}", phase, b, 1 if phase == "decode" else c, c)
        for b, c in itertools.product(batch, context)
    ]
    return deployments, workloads


def sweep(model: str, db: str | Path, deployments: list[tuple], workloads: list[tuple]) -> pa.Table:
    """SOL and memory for every (deployment, workload) of the grid, for one model."""
    from archsql.api import default_db
    from archsql.store import connect

    if not deployments or not workloads:
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / cp / pp / ep degrees")
    con = connect(Path(db) if db else default_db(), read_only=False)
    try:
        (known,) = con.execute("select count(*) from models where model = ?", [model]).fetchone()
        if not known:
            raise QueryError(f"model '{model}' is not in the store; run `archsql build {model}` first")
        con.begin()
        columns, marks = ", ".join(DEPLOYMENT_COLUMNS), ", ".join("?" * len(DEPLOYMENT_COLUMNS))
        con.executemany(f"insert into deployments ({columns}) values ({marks})", deployments)
        con.executemany("insert into workloads values (?, ?, ?, ?, ?)", workloads)
        problems = con.execute(
            "select deployment, problem from deployment_checks where deployment like 'sweep:%'"
        ).fetchall()
        if problems:
            raise QueryError("invalid sweep deployments: " + "; ".join(f"{d}: {p}" for d, p in problems[:5]))
        table = con.sql(SWEEP_SQL, params=[model]).to_arrow_table()
        con.rollback()
        return table
    finally:
        con.close()


def pareto(table: pa.Table, x: str = "tokens_per_s_per_user", y: str = "tokens_per_s_per_gpu") -> pa.Table:
    """The points no other fitting point beats on both ``x`` and ``y`` (higher is better); a
    point whose layout the model cannot run (``layout_problems``) is not a candidate."""
    import duckdb

    con = duckdb.connect()
    con.register("points", table)
    return con.sql(
        f"""
        select p.* from points as p
        where p.fits and p.layout_problems is null and not exists (
            select 1 from points as q
            where q.fits and q.layout_problems is null and q.{x} >= p.{x} and q.{y} >= p.{y} and (q.{x} > p.{x} or q.{y} > p.{y})
        )
        order by p.{x}
        """
    ).to_arrow_table()
