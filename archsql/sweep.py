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
    s.deployment, s.gpu, s.gpus, d.tp, d.dp, d.ep, d.moe_tp, d.weight_dtype, d.kv_dtype,
    s.workload, s.phase, s.batch, s.new_tokens, s.context,
    s.time_s, s.compute_s, s.memory_s, s.comm_s, s.tokens_per_s, s.tokens_per_s_per_gpu,
    s.new_tokens / nullif(s.time_s, 0) as tokens_per_s_per_user,
    m.weight_bytes, m.kv_bytes, m.fits, m.shortfall_bytes, m.max_batch, s.beyond_max_context
from step_sol as s
join device_memory as m using (model, deployment, workload)
join deployments as d using (deployment)
where s.model = ? and s.deployment like 'sweep:%' and s.workload like 'sweep:%'
order by s.deployment, s.workload
"""


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
) -> tuple[list[tuple], list[tuple]]:
    """Deployment and workload rows of a sweep.  Attention runs tp × dp = GPUs (dp is what
    tp leaves), MoE ep × moe_tp = GPUs; combinations that do not divide are skipped."""
    deployments = []
    for gpu, n, t, e, w, k in itertools.product(gpus, counts, tp, ep, weights, kv):
        if n % t or n % e:
            continue
        name = f"sweep:{n}x{gpu}:tp{t}-dp{n // t}-ep{e}-w{w}-kv{k}"
        deployments.append((name, gpu, n, t, n // t, e, n // e, 1, w, "bf16", k, usable_memory_fraction))
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
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / ep degrees")
    con = connect(Path(db) if db else default_db(), read_only=False)
    try:
        (known,) = con.execute("select count(*) from models where model = ?", [model]).fetchone()
        if not known:
            raise QueryError(f"model '{model}' is not in the store; run `archsql build {model}` first")
        con.begin()
        con.executemany("insert into deployments values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", deployments)
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
    """The points no other fitting point beats on both ``x`` and ``y`` (higher is better)."""
    import duckdb

    con = duckdb.connect()
    con.register("points", table)
    return con.sql(
        f"""
        select p.* from points as p
        where p.fits and not exists (
            select 1 from points as q
            where q.fits and q.{x} >= p.{x} and q.{y} >= p.{y} and (q.{x} > p.{x} or q.{y} > p.{y})
        )
        order by p.{x}
        """
    ).to_arrow_table()
