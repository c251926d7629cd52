"""Sweeps: a grid of deployments × workloads answered by the SOL views in one query.

The grid is written into temporary tables that shadow the store's parameter tables on a
read-only connection (:func:`archsql.store.scope_grid`), so a sweep never changes the store
and needs no write lock; the views do all the arithmetic.  The views read the live tables
scoped to the sweep's model and grid, never the store's derived tables for what the grid
changes (they do not hold the grid), so a sweep costs its own points whatever else the
store holds.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from archsql.errors import Issue, QueryError, did_you_mean
from archsql.evaluator.storage import NATIVE
from archsql.schema.parallel import AXES, MESH_AXES, SPANS, SWEPT_AXES, fill_degrees

# the most points one sweep answers: its memory grows ≈ 20 KB a point (Llama-3.1-8B: 3,920
# points 0.34 GB RSS, 40,000 points 0.85 GB), so 100,000 stay near 2 GB on a 24 GB machine
MAX_POINTS = 100_000

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


@dataclass(frozen=True)
class Dropped:
    """A grid point left out before the query, and why (a degree that does not divide the
    GPU count, a layout that needs more GPUs than given)."""

    gpus: int
    layout: str  # the degrees as given, e.g. 'tp3,ep8'
    reason: str

    def __str__(self) -> str:
        return f"{self.layout} on {self.gpus} GPUs: {self.reason}"


@dataclass
class Grid:
    """The rows of a sweep (one mapping per deployment and per workload) and the grid points
    left out (:class:`Dropped`)."""

    deployments: list[dict]
    workloads: list[dict]
    dropped: list[Dropped] = field(default_factory=list)
    # deployment → its layout as the grid was given (``tp8,ep8``, with the dp a count leaves)
    labels: dict[str, str] = field(default_factory=dict)


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
    by name); :func:`plan` with the dropped points left out."""
    g = plan(
        gpus,
        counts,
        batch,
        context,
        weights,
        kv,
        phase,
        usable_memory_fraction,
        degrees=degrees,
        cp_kinds=cp_kinds,
    )
    return g.deployments, g.workloads


def plan(
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
    layouts: Sequence[Mapping[str, int]] | None = None,
    cp_kinds: Sequence[str] = ("ring",),
) -> Grid:
    """The sweep's grid.  Layouts are either ``layouts`` — a list of meshes, each the degrees
    of some mesh axes (:func:`parse_layout`: ``tp8,ep8``; an axis not named takes its default,
    or, for dp and moe_tp, what its span leaves of the GPUs) — or the product of ``degrees``,
    the degrees tried of each swept axis (``SWEPT_AXES``: tp, ep, pp, cp; an axis not given:
    its default), each other axis taking what its span leaves — attention runs
    tp × cp × dp × pp = GPUs, MoE ep × moe_tp × pp = GPUs.  A layout whose degrees do not
    divide a GPU count, or need more GPUs than it, is a :class:`Dropped` point with the
    reason.  Every cp > 1 is tried with each of ``cp_kinds`` (ulysses, ring).  ``phase``:
    prefill, decode or ``both`` (a prefill and a decode workload per batch × context)."""
    degrees = dict(degrees or {})
    if layouts is not None and degrees:
        raise QueryError("give the layouts as a list or the degrees of each swept axis, not both")
    unknown = sorted(set(degrees) - {a.name for a in SWEPT_AXES})
    if unknown:
        raise QueryError(f"'{unknown[0]}' is not a swept mesh axis (swept: {', '.join(a.name for a in SWEPT_AXES)})")
    sizes = {"GPU count": counts, "batch": batch, "context": context, **{f"{k} degree": v for k, v in degrees.items()}}
    for what, values in sizes.items():  # a 0 degree would divide the GPUs by zero
        bad = [v for v in values if type(v) is not int or v < 1]
        if bad:
            raise QueryError(f"sweep {what} must be an integer >= 1, got {bad[0]!r}")
    if not 0 < usable_memory_fraction <= 1:
        raise QueryError(f"the usable memory fraction must be in (0, 1], got {usable_memory_fraction!r}")
    phases = ("prefill", "decode") if phase == "both" else (phase,)
    if any(p not in ("prefill", "decode") for p in phases):
        raise QueryError(f"sweep phase must be prefill, decode or both, got {phase!r}")
    if layouts is None:
        tried = [degrees.get(a.name, (a.default,)) for a in SWEPT_AXES]
        layouts = [
            {a.name: d for a, d in zip(SWEPT_AXES, chosen, strict=True) if d != a.default}
            for chosen in itertools.product(*tried)
        ]
    deployments, dropped, labels = [], [], {}
    for n, layout in itertools.product(counts, layouts):
        mesh, reason = mesh_of(n, layout)
        given = ",".join(f"{a}{d}" for a, d in layout.items()) or "tp1"  # as written
        if reason is not None:
            dropped.append(Dropped(n, given, reason))
            continue
        shown = {**layout, **({"dp": mesh["dp"]} if "dp" not in layout else {})}
        for gpu, w, k in itertools.product(gpus, weights, kv):
            for row in _grid_deployments(gpu, n, mesh, w, k, usable_memory_fraction, cp_kinds):
                name = row["deployment"]
                if name in labels:  # the same mesh written twice (tp8 and tp8,dp1)
                    if (gpu, w, k) == (gpus[0], weights[0], kv[0]):
                        dropped.append(Dropped(n, given, f"the same layout as {labels[name]}"))
                    continue
                labels[name] = layout_label(shown, row["cp_kind"])
                deployments.append(row)
    workloads = [
        {
            "workload": f"sweep:{p}:b{b}:c{c}",
            "phase": p,
            "batch": b,
            "new_tokens": 1 if p == "decode" else c,
            "context": c,
        }
        for p in phases
        for b, c in itertools.product(batch, context)
    ]
    return Grid(deployments, workloads, dropped, labels)


# ---------------------------------------------------------------------------- layouts

_TOKEN = re.compile(r"^([a-z_]+?)(\d+)$")


def parse_layout(text: str, where: str = "layout") -> dict[str, int]:
    """``'tp8,ep8'`` → ``{'tp': 8, 'ep': 8}``: comma-separated mesh axes (MESH_AXES) each
    followed by its degree.  ``where`` (an option or ``file:line``) locates an error."""
    out: dict[str, int] = {}
    names = [a.name for a in MESH_AXES]
    for token in (t.strip().lower() for t in text.split(",")):
        match = _TOKEN.match(token)
        if match is None:
            raise QueryError(
                f"{where}: {token!r} is not an axis and a degree; write a layout as axes with degrees, "
                f"e.g. tp8,ep8 or tp4,dp2 (axes: {', '.join(names)})"
            )
        axis, degree = match.group(1), int(match.group(2))
        if axis not in AXES:
            hint = did_you_mean(axis, names)
            raise QueryError(
                f"{where}: '{axis}' is not a mesh axis ({hint + ' ' if hint else ''}axes: {', '.join(names)})"
            )
        if axis in out:
            raise QueryError(f"{where}: {axis} is given twice ({axis}{out[axis]} and {token})")
        if degree < 1:
            raise QueryError(f"{where}: the degree of {axis} must be at least 1, got {degree}")
        out[axis] = degree
    return out


def read_layouts(path: str | Path) -> list[dict[str, int]]:
    """Layouts from a file: one per line (``tp8,ep8``); blank lines and ``#`` comments skipped."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(parse_layout(line, where=f"{path}:{number}"))
    if not out:
        raise QueryError(f"{path}: no layout in the file (write one per line, e.g. tp8,ep8)")
    return out


def layout_label(mesh: Mapping[str, int], kind: str | None = None) -> str:
    """``{'tp': 8, 'dp': 1, 'ep': 8}`` → ``'tp8,ep8'``: the degrees that are not 1, in
    MESH_AXES order (a cp degree with its kind: ``cp2-ulysses``); ``'tp1'`` when all are 1."""
    parts = []
    for a in MESH_AXES:
        d = mesh.get(a.name)
        if d is None or d == 1:
            continue
        parts.append(f"{a.name}{d}" + (f"-{kind}" if a.name == "cp" and kind and kind != "none" else ""))
    return ",".join(parts) or "tp1"


def _product(names: Sequence[str], mesh: Mapping[str, int]) -> tuple[str, int]:
    value = 1
    for n in names:
        value *= mesh.get(n, AXES[n].default)
    return "·".join(names), value


def mesh_of(gpus: int, layout: Mapping[str, int]) -> tuple[dict[str, int], str | None]:
    """The full mesh of ``layout`` on ``gpus`` GPUs (:func:`fill_degrees`), or the reason it
    cannot run there: each span's degrees (attention tp·cp·dp·pp, MoE ep·moe_tp·pp) must
    multiply to the GPU count."""
    mesh = {a.name: a.default for a in MESH_AXES if a.fills is None} | fill_degrees(gpus, layout)
    for span in SPANS:
        axes = [a.name for a in MESH_AXES if span in a.spans]
        (fill,) = (a.name for a in MESH_AXES if a.fills == span)
        if fill not in mesh:  # the others' product does not divide the GPUs
            names, value = _product([a for a in axes if a != fill], mesh)
            if value > gpus:
                return mesh, f"{names} = {value} needs {value} GPUs, given {gpus}"
            return mesh, f"{names} = {value} does not divide {gpus} GPUs"
        names, value = _product(axes, mesh)
        if value > gpus:
            return mesh, f"{names} = {value} needs {value} GPUs, given {gpus}"
        if value < gpus:
            return (
                mesh,
                f"{names} = {value} leaves {gpus - value} of {gpus} GPUs idle (raise {fill} or lower the count)",
            )
    return mesh, None


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
    from archsql.api import default_db, query_connection
    from archsql.store_hold import held

    if not deployments or not workloads:
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / cp / pp / ep degrees")
    points = len(deployments) * len(workloads)
    if points > MAX_POINTS:
        raise QueryError(
            f"the sweep grid has {points:,} points ({len(deployments):,} layouts × {len(workloads):,} batch × context "
            f"workloads); one sweep answers at most {MAX_POINTS:,}",
            [Issue("narrow --batch / --context / the degrees, or split the grid over several sweeps")],
        )
    # the store's read-only query connection (held between the queries and sweeps of this
    # process while its file is unchanged: archsql.store_hold); the grid lives in temporary
    # tables of a cursor of its own, gone when the cursor closes
    with held(Path(db) if db else default_db(), query_connection) as (held_con, state):
        con = held_con.cursor()
        try:
            return _answer(con, state, model, deployments, workloads)
        finally:
            con.close()


def _answer(con, state, model: str, deployments: list[dict], workloads: list[dict]) -> pa.Table:
    from archsql.store import DEPLOYMENT_TABLES, WORKLOAD_TABLES, reuse_derived, scope_grid, view_graph_of
    from archsql.views import computed_once, relations_read

    (known,) = con.execute("select count(*) from models where model = ?", [model]).fetchall()[0]
    if not known:
        raise QueryError(f"model '{model}' is not in the store; run `archsql build {model}` first")
    if state.graph is None:
        state.graph = view_graph_of(con)
    graph = state.graph
    scope_grid(con, model, deployments, workloads)
    read = relations_read(con, SWEEP_SQL)
    needed = graph.order if read is None else graph.closure({*read, "parameter_checks"})
    if state.freshness.fresh:  # what the grid cannot change (model-only views, GPU specs): the model's stored rows
        reuse_derived(con, graph, needed, [*DEPLOYMENT_TABLES, *WORKLOAD_TABLES], model=model)
    # the rest planned and run once, each from the ones before (left for the cursor's close)
    with computed_once(con, order=needed, keep=True):
        problems = con.execute(
            "select name, problem from parameter_checks where name like 'sweep:%' order by all"
        ).fetchall()
        if problems:  # the views leave an invalid row out: refuse the sweep rather than answer less
            raise QueryError("invalid sweep rows: " + "; ".join(f"{d}: {p}" for d, p in problems[:5]))
        return con.sql(SWEEP_SQL, params=[model]).to_arrow_table()


# ---------------------------------------------------------------------------- one row per point

# the columns of a (deployment, workload) row that describe the deployment, the same in both phases
_DEPLOYMENT_COLUMNS = (
    "deployment",
    "gpu",
    "gpus",
    "nodes",
    *(a.name for a in MESH_AXES),
    "cp_kind",
    "weight_dtype",
    "weight_profile",
    "kv_dtype",
)
# what a step of one phase measures: kept as <phase>_<column> beside the headline columns
_PHASE_COLUMNS = (
    "compute_s",
    "memory_s",
    "comm_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "kv_bytes",
    "activation_bytes",
    "fits",
    "shortfall_bytes",
    "max_batch",
    "limited_by",
)
# the table a person reads first: the columns that matter, in this order (present ones only)
NARROW_COLUMNS = (
    "layout",
    "batch",
    "context",
    "fits",
    "ttft_s",
    "tpot_s",
    "tokens_per_s_per_gpu",
    "tokens_per_s_per_user",
    "max_batch",
)


def points(table: pa.Table, labels: Mapping[str, str] | None = None) -> pa.Table:
    """One row per grid point (deployment × batch × context) from the rows of :func:`sweep`
    (one per deployment × workload): the prefill step's time as ``ttft_s`` and the decode
    step's as ``tpot_s``, side by side, with ``fits`` true when every phase fits, and the
    serving figures (``tokens_per_s_per_gpu``, ``tokens_per_s_per_user``, ``max_batch``,
    ``limited_by``) of the decode step (of the prefill step when the sweep has no decode).
    Every value is a column of the sweep's rows, moved, never computed again; each phase's
    own columns follow as ``prefill_*`` / ``decode_*``.  ``labels`` (:attr:`Grid.labels`):
    each deployment's layout as the grid gave it, and the order of the rows (default: the
    degrees that are not 1, rows by deployment name)."""
    import duckdb

    labels = dict(labels or {})
    degrees = table.select(["deployment", *(a.name for a in MESH_AXES), "cp_kind"]).to_pylist()
    layout = [labels.get(r["deployment"]) or layout_label(r, r["cp_kind"]) for r in degrees]
    table = table.append_column("layout", pa.array(layout, pa.string()))
    phases = [p for p in ("prefill", "decode") if p in set(table.column("phase").to_pylist())]
    if not phases:
        raise QueryError("the sweep answered no point")
    main = "decode" if "decode" in phases else "prefill"
    names = list(dict.fromkeys([*labels, *sorted(set(table.column("deployment").to_pylist()))]))
    positions = pa.table({"deployment": names, "position": list(range(len(names)))})

    def pick(column: str) -> str:  # a column equal in every phase of a point
        return (
            "coalesce(" + ", ".join(f"{p}.{column}" for p in phases) + ")"
            if len(phases) > 1
            else f"{phases[0]}.{column}"
        )

    select = [f"{pick(c)} as {c}" for c in ("layout", *_DEPLOYMENT_COLUMNS, "batch", "context")]
    select.append(" and ".join(f"{p}.fits" for p in phases) + " as fits")
    select += [f"{p}.time_s as {'ttft_s' if p == 'prefill' else 'tpot_s'}" for p in phases]
    select += [f"{main}.{c}" for c in ("tokens_per_s_per_gpu", "tokens_per_s_per_user", "max_batch", "limited_by")]
    select.append(f"{pick('weight_bytes')} as weight_bytes")
    select += [f"{p}.{c} as {p}_{c}" for p in phases for c in _PHASE_COLUMNS]
    select.append(" or ".join(f"{p}.beyond_max_context" for p in phases) + " as beyond_max_context")
    select.append(f"{pick('layout_problems')} as layout_problems")
    sources = [f"(select * from rows where phase = '{p}') as {p}" for p in phases]
    joins = sources[0] + "".join(f" full join {src} using (deployment, batch, context)" for src in sources[1:])
    con = duckdb.connect()
    try:
        con.register("rows", table)
        con.register("positions", positions)
        return con.sql(
            f"""
            select {", ".join(select)}
            from {joins}
            left join positions as o on o.deployment = {pick("deployment")}
            order by o.position, {pick("deployment")}, {pick("batch")}, {pick("context")}
            """
        ).to_arrow_table()
    finally:
        con.close()


def narrow(table: pa.Table) -> list[str]:
    """The columns of :data:`NARROW_COLUMNS` that ``table`` has, plus each grid dimension
    that varies across it (GPU, GPU count, weight profile, KV dtype) and, when any point has
    them, its layout problems and whether a context is beyond the model's maximum."""
    varying = [
        c
        for c in ("gpu", "gpus", "weight_profile", "kv_dtype")
        if c in table.column_names and len(set(table.column(c).to_pylist())) > 1
    ]
    shown = [c for c in NARROW_COLUMNS if c in table.column_names]
    shown[1:1] = varying  # after the layout
    for flag in ("beyond_max_context", "layout_problems"):
        if flag in table.column_names and any(v for v in table.column(flag).to_pylist()):
            shown.append(flag)
    return shown


def pareto(table: pa.Table, x: str = "tokens_per_s_per_user", y: str = "tokens_per_s_per_gpu") -> pa.Table:
    """The points no other fitting point beats on both ``x`` and ``y`` (higher is better); a
    point whose layout the model cannot run (``layout_problems``) is not a candidate."""
    import duckdb

    from archsql.views import create_macros

    con = duckdb.connect()
    create_macros(con)  # dominates(): the rule the saved query site_sweep_pareto applies too
    con.register("points", table)
    return con.sql(
        f"""
        select p.* from points as p
        where p.fits and p.layout_problems is null and not exists (
            select 1 from points as q
            where q.fits and q.layout_problems is null and dominates(q.{x}, q.{y}, p.{x}, p.{y})
        )
        order by p.{x}
        """
    ).to_arrow_table()


# ---------------------------------------------------------------------------- ranked by serving

# the serving_estimates columns a ranked row shows, after the layout and the GPUs
_SERVING_COLUMNS = (
    "concurrency",
    "ttft_s",
    "tpot_s",
    "output_tokens_per_s",
    "admitted_requests",
    "queue_wait_s",
    "prefill_workload",
    "decode_workload",
)


def serving_ranked(
    model: str,
    db: str | Path,
    grid: Grid,
    framework: str,
    version: str,
    isl: int,
    osl: int,
    concurrency: Sequence[int],
    memory_fraction: float | None = None,
) -> tuple[pa.Table, list[str]]:
    """Every layout of ``grid`` served by ``framework`` at ``version`` (archsql.serving,
    docs/serving.md) at each client concurrency for prompts of ``isl`` and outputs of ``osl``
    tokens: TTFT, TPOT and output tokens/s (``serving_estimates``), with output tokens/s per GPU
    and per user (1 / TPOT), ranked by output tokens/s per GPU.  The grid's deployments take
    ``memory_fraction`` of each GPU's memory, or the framework's default (None).  A layout archsql cannot serve (a
    rejected deployment, no fitted constants for its GPU) is left out and named in the second
    value.  Nothing is written: the deployments and cases live in a transaction rolled back."""
    from archsql import serving
    from archsql.store import connect, insert_deployments

    if not grid.deployments:
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / cp / pp / ep degrees")
    con = connect(Path(db), read_only=False, derived=False)
    try:
        con.begin()
        (known,) = con.execute("select count(*) from models where model = ?", [model]).fetchall()[0]
        if not known:
            raise QueryError(f"model '{model}' is not in the store; run `archsql build {model}` first")
        insert_deployments(
            con, [dict(d, framework=framework, usable_memory_fraction=memory_fraction) for d in grid.deployments]
        )
        cases = [
            dict(
                serving_case=f"{d['deployment']}@c{c}",
                model=model,
                deployment=d["deployment"],
                framework=framework,
                version=version,
                isl=isl,
                osl=osl,
                concurrency=c,
                acceptance_rate=None,
            )
            for d in grid.deployments
            for c in concurrency
        ]
        problems = serving.check_cases(con, cases)
        if problems and len(problems) == len(cases):
            first = next(iter(problems.values()))
            raise QueryError("no layout of the sweep can be served", issues=first)
        left_out = sorted({i.message.split(": ", 1)[1] for v in problems.values() for i in v})
        good = [c for c in cases if c["serving_case"] not in problems]
        serving.price_steps(con, serving.prepare(con, good))
        rows = serving.estimates(con, [c["serving_case"] for c in good]).to_pylist()
        serving.release(con)
        con.rollback()
    finally:
        con.close()
    gpus = {d["deployment"]: d["gpus"] for d in grid.deployments}
    out = [
        {
            "layout": grid.labels.get(r["deployment"], r["deployment"]),
            "gpu": r["gpu"],
            "gpus": gpus[r["deployment"]],
            **{k: r[k] for k in _SERVING_COLUMNS},
            "tokens_per_s_per_gpu": r["output_tokens_per_s"] / gpus[r["deployment"]]
            if r["output_tokens_per_s"] is not None
            else None,
            "tokens_per_s_per_user": 1 / r["tpot_s"] if r["tpot_s"] else None,
            "deployment": r["deployment"],
        }
        for r in rows
    ]
    out.sort(key=lambda r: (-(r["tokens_per_s_per_gpu"] or 0), r["layout"], r["concurrency"]))
    return pa.Table.from_pylist(out), left_out


# ---------------------------------------------------------------------------- saved sweeps

# A sweep saved by name (``archsql sweep MODEL … --save NAME``): its points as the sweep
# answered them, kept in the store so a page can read them (the explorer's sweep frontier,
# the saved query site_sweep_pareto); the grid itself lives only for the sweep's query.
# Keyed by model and name: saving a name again replaces its points.  The store's build
# record (store_meta) tells a saved sweep that a later build of its model made stale.
SAVED_SCHEMAS = {
    "sweeps": pa.schema(
        [
            ("model", pa.string()),
            ("sweep", pa.string()),
            ("saved_at_utc", pa.timestamp("us")),
            ("grid", pa.string()),  # the sweep as asked (the command's options)
            ("points", pa.int64()),
            ("dropped", pa.list_(pa.string())),  # grid points left out, and why
        ]
    ),
    "sweep_points": pa.schema(
        [
            ("model", pa.string()),
            ("sweep", pa.string()),
            ("layout", pa.string()),
            ("deployment", pa.string()),
            ("gpu", pa.string()),
            ("gpus", pa.int64()),
            ("weight_profile", pa.string()),
            ("kv_dtype", pa.string()),
            ("batch", pa.int64()),
            ("context", pa.int64()),
            ("fits", pa.bool_()),
            ("ttft_s", pa.float64()),
            ("tpot_s", pa.float64()),
            ("tokens_per_s_per_gpu", pa.float64()),
            ("tokens_per_s_per_user", pa.float64()),
            ("max_batch", pa.int64()),
            ("limited_by", pa.string()),
            ("beyond_max_context", pa.bool_()),
            ("layout_problems", pa.string()),
        ]
    ),
}
SAVED_KEYS = {"sweeps": ("model", "sweep"), "sweep_points": ("model", "sweep", "deployment", "batch", "context")}
SAVED_TABLES = tuple(SAVED_SCHEMAS)


def save(
    db: str | Path, name: str, model: str, table: pa.Table, grid_text: str = "", dropped: Sequence[Dropped] = ()
) -> int:
    """Keep the points of a sweep (:func:`points`'s table) in the store ``db`` as sweep
    ``name`` of ``model`` (replacing a sweep of that name); the number of points saved."""
    from datetime import UTC, datetime

    from archsql.api import default_db
    from archsql.store import connect, write_record

    name = name.strip()
    if not name:
        raise QueryError("--save needs a name for the sweep, e.g. --save tp-vs-ep")
    columns = SAVED_SCHEMAS["sweep_points"].names
    n = table.num_rows
    present = {c: table.column(c) for c in columns if c in table.column_names}
    full = {c: present.get(c, pa.nulls(n, SAVED_SCHEMAS["sweep_points"].field(c).type)) for c in columns}
    full["model"], full["sweep"] = pa.array([model] * n, pa.string()), pa.array([name] * n, pa.string())
    rows = pa.table(full).cast(SAVED_SCHEMAS["sweep_points"])
    saved_at = datetime.now(UTC).replace(tzinfo=None)
    head = [{"model": model, "sweep": name, "saved_at_utc": saved_at, "grid": grid_text, "points": n,
             "dropped": [str(d) for d in dropped]}]  # fmt: skip
    tables = {"sweeps": pa.Table.from_pylist(head, schema=SAVED_SCHEMAS["sweeps"]), "sweep_points": rows}
    con = connect(Path(db) if db else default_db(), read_only=False)
    try:
        con.begin()
        for table_name, rows_of in tables.items():
            write_record(con, table_name, rows_of, SAVED_KEYS[table_name], {"model": model, "sweep": name})
        con.commit()
    finally:
        con.close()
    return n
