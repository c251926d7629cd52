"""Sweeps: a grid of deployments × workloads answered by the SOL views in one query.

The grid is written into the store's parameter tables inside a transaction that is rolled
back afterwards, so a sweep never changes the store; the views do all the arithmetic.  The
views read the live tables scoped to the sweep's model and grid (:func:`archsql.store.scope`),
never the store's derived tables (which do not hold the grid), so a sweep costs its own
points whatever else the store holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from archsql.errors import QueryError
from archsql.evaluator.storage import NATIVE
from archsql.schema.parallel import MESH_AXES, SWEPT_AXES, fill_degrees

# the degree of every mesh axis, in MESH_AXES order
_DEGREES = ", ".join(f"g.{a.name}" for a in MESH_AXES)

SWEEP_SQL = f"""
select
    s.deployment, s.gpu, s.gpus, n.nodes, {_DEGREES}, d.cp_kind,
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
join int_deployment_degrees as g using (deployment)
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


# weight dtype of a sweep → the precision profile its weights are stored in; 'native': as the
# checkpoint ships them (each model's own format, read from its config), with no one matmul
# dtype (deployments.weight_dtype null: each quantized weight's matmul in its stored element)
WEIGHT_PROFILES = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "nvfp4", NATIVE: NATIVE}


def grid(
    gpus: Sequence[str],
    counts: Sequence[int],
    batch: Sequence[int],
    context: Sequence[int],
    weights: Sequence[str] = ("bf16",),
    kv: Sequence[str] = ("bf16",),
    phase: str = "decode",
    usable_memory_fraction: float = 0.9,
    *,
    degrees: Mapping[str, Sequence[int]] | None = None,
    cp_kinds: Sequence[str] = ("ring",),
) -> tuple[list[dict], list[dict]]:
    """Deployment and workload rows of a sweep (one mapping each: columns and mesh degrees
    by name).  ``degrees`` gives the degrees tried of each swept axis (``SWEPT_AXES``: tp,
    ep, pp, cp; an axis not given: its default); each other axis takes what its span leaves
    — attention runs tp × cp × dp × pp = GPUs, MoE ep × moe_tp × pp = GPUs — and
    combinations that do not divide are skipped.  Every cp > 1 is tried with each of
    ``cp_kinds`` (ulysses, ring)."""
    degrees = dict(degrees or {})
    unknown = sorted(set(degrees) - {a.name for a in SWEPT_AXES})
    if unknown:
        raise QueryError(f"'{unknown[0]}' is not a swept mesh axis (swept: {', '.join(a.name for a in SWEPT_AXES)})")
    sizes = {"GPU count": counts, "batch": batch, "context": context, **{f"{k} degree": v for k, v in degrees.items()}}
    for what, values in sizes.items():  # a 0 degree would divide the GPUs by zero
        bad = [v for v in values if type(v) is not int or v < 1]
        if bad:
            raise QueryError(f"sweep {what} must be an integer >= 1, got {bad[0]!r}")
    tried = [degrees.get(a.name, (a.default,)) for a in SWEPT_AXES]
    deployments = []
    for gpu, n, *chosen, w, k in itertools.product(gpus, counts, *tried, weights, kv):
        mesh = fill_degrees(n, dict(zip((a.name for a in SWEPT_AXES), chosen, strict=True)))
        if all(a.name in mesh for a in MESH_AXES if a.fills):  # else the degrees do not divide n
            deployments.extend(_grid_deployments(gpu, n, mesh, w, k, usable_memory_fraction, cp_kinds))
    workloads = [
        {
            "workload": f"sweep:{phase}:b{b}:c{c}",
            "phase": phase,
            "batch": b,
            "new_tokens": 1 if phase == "decode" else c,
            "context": c,
        }
        for b, c in itertools.product(batch, context)
    ]
    return deployments, workloads


def _grid_deployments(gpu, n, mesh, w, k, usable_memory_fraction, cp_kinds) -> list[dict]:
    rows = []
    t, c, p, dp, e = mesh["tp"], mesh["cp"], mesh["pp"], mesh["dp"], mesh["ep"]
    for kind in cp_kinds if c > 1 else ("none",):
        ctx = f"-cp{c}-{kind}" if c > 1 else ""
        stages = f"-pp{p}" if p > 1 else ""
        row = {
            "deployment": f"sweep:{n}x{gpu}:tp{t}{ctx}-dp{dp}-ep{e}{stages}-w{w}-kv{k}",
            "gpu": gpu,
            "gpus": n,
            "cp_kind": kind,
            "weight_dtype": None if w == NATIVE else w,
            "act_dtype": "bf16",
            "kv_dtype": k,
            "usable_memory_fraction": usable_memory_fraction,
            "weight_profile": WEIGHT_PROFILES.get(w, w),
            **mesh,
        }
        rows.append(row)
    return rows


def sweep(model: str, db: str | Path, deployments: list[dict], workloads: list[dict]) -> pa.Table:
    """SOL and memory for every (deployment, workload) of the grid, for one model."""
    from archsql.api import default_db
    from archsql.store import (
        DEPLOYMENT_TABLES,
        WORKLOAD_TABLES,
        connect,
        insert_deployments,
        insert_rows,
        reuse_derived,
        scope,
        snapshot,
        view_graph_of,
    )
    from archsql.views import computed_once, relations_read

    if not deployments or not workloads:
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / cp / pp / ep degrees")
    con = connect(Path(db) if db else default_db(), read_only=False, derived=False)
    try:
        (known,) = con.execute("select count(*) from models where model = ?", [model]).fetchone()
        if not known:
            raise QueryError(f"model '{model}' is not in the store; run `archsql build {model}` first")
        graph = view_graph_of(con)
        current = snapshot(con).fresh  # the derived rows hold the store's views (before the grid)
        con.begin()
        insert_deployments(con, deployments)
        insert_rows(con, "workloads", workloads)
        scope(
            con,
            models=[model],
            deployments=[d["deployment"] for d in deployments],
            workloads=[w["workload"] for w in workloads],
        )
        problems = con.execute(
            "select name, problem from parameter_checks where name like 'sweep:%' order by all"
        ).fetchall()
        if problems:  # the views leave an invalid row out: refuse the sweep rather than answer less
            raise QueryError("invalid sweep rows: " + "; ".join(f"{d}: {p}" for d, p in problems[:5]))
        read = relations_read(con, SWEEP_SQL)
        needed = graph.order if read is None else graph.closure(read)
        if current:  # what the grid cannot change (model-only views, GPU specs): the model's stored rows
            reuse_derived(con, graph, needed, [*DEPLOYMENT_TABLES, *WORKLOAD_TABLES], model=model)
        with computed_once(con, order=needed):  # the rest planned and run once, each from the ones before
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
