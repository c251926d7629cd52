"""The measurement plan: the unique kernel shapes one device runs in a step of a deployment.

The plan is a query, not a second computation: the store's ``kernel_plan`` view (the
``kernel_signatures`` of a model × deployment × workload, deduplicated) gives every distinct
per-device kernel signature — read through the deployment's layouts, so a TP = 8 column-
parallel projection plans ``n / 8`` — with its launches per step and the ops that hit it.
``measured_vs_sol`` joins the same signatures with the corpus, so a shape measured from
this plan is exactly the row that op later matches.

Which nodes launch which kernel (``int_node_kernels``): linear, lm_head and router nodes are
``gemm`` (m = tokens, n, k from the weight on one device); routed expert projections
``grouped_gemm`` (tokens before routing, top-k, experts, ep); an attention score with the
softcap / softmax / apply nodes after it one flash ``attention`` kernel (bidirectional:
``encoder_attention``); ``rmsnorm``; an inferred all-reduce ``all_reduce`` (message bytes,
group size).  Every other node (element-wise, views, routing, recurrent and sparse kernels,
chunked attention) is listed as unplanned.

:func:`plan` reads the views of the store ``db`` when it holds the model (its own
workloads and deployments); otherwise it evaluates the model into a temporary store with
the default parameter tables.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from archsql.errors import CorpusError, Issue, StoreError, unknown_name
from archsql.kernel_corpus.harness import Shape

DEFAULT_DEPLOYMENT = "1xH200-single"

# kernel_plan columns that are not shape fields of a harness Shape: identity, the dtypes
# (the harness measures in the dtype it is asked for) and provenance of the cut (tp, nodes)
_NOT_FIELDS = {
    "model",
    "deployment",
    "gpu",
    "workload",
    "phase",
    "op_kind",
    "dtype",
    "weight_dtype",
    "kv_dtype",
    "tp",
    "nodes",
    "launches",
    "ops",
    "uids",
}
# op kinds whose kernels differ by phase (the harness passes the phase on)
_PHASED = ("attention", "encoder_attention")


@dataclass
class Plan:
    model: str
    deployment: str
    workload: str
    phase: str
    bind: dict[str, int]  # the workload's B (requests), s (new tokens), c (context)
    shapes: list[Shape] = field(default_factory=list)
    unplanned: dict[str, int] = field(default_factory=dict)  # op -> nodes with work no planned kernel covers


def plan(model: str, workload: str, deployment: str = DEFAULT_DEPLOYMENT, *, db: str | Path | None = None) -> Plan:
    """The distinct kernel shapes one device of ``deployment`` runs in a ``workload`` step
    of ``model`` (rows of the ``workloads`` and ``deployments`` tables)."""
    with _store(model, db) as con:
        _check_name(con, "workload", workload, "select workload from workloads")
        _check_name(con, "deployment", deployment, "select deployment from deployments")
        ((phase, batch, new_tokens, context),) = con.execute(
            "select phase, batch, new_tokens, context from workloads where workload = ?", [workload]
        ).fetchall()
        rows = (
            con.sql(
                "select * from kernel_plan where model = ? and deployment = ? and workload = ?",
                params=[model, deployment, workload],
            )
            .to_arrow_table()
            .to_pylist()
        )
        # ops with work on this deployment that no planned kernel covers
        unplanned = con.execute(
            "select k.op, count(*) from int_node_kernels as k inner join op_sol as o "
            "on o.model = k.model and o.phase = k.phase and o.uid = k.uid "
            "where k.model = ? and o.deployment = ? and o.workload = ? and k.op_kind is null and o.time_s > 0 "
            "group by k.op order by k.op",
            [model, deployment, workload],
        ).fetchall()
    shapes = [
        Shape.of(
            r["op_kind"],
            r["phase"] if r["op_kind"] in _PHASED else None,
            count=r["launches"],
            nodes=r["uids"],
            **{k: v for k, v in r.items() if k not in _NOT_FIELDS and v is not None},
        )
        for r in rows
    ]
    shapes.sort(key=lambda s: (s.op_kind, str(s.fields)))
    bind = {"B": batch, "s": new_tokens, "c": context}
    return Plan(model, deployment, workload, phase, bind, shapes, dict(unplanned))


@contextmanager
def _store(model: str, db: str | Path | None):
    """A read-only connection to a store holding ``model``: ``db`` when it does, else a
    temporary store of the model alone (default workloads and deployments)."""
    if db is not None and Path(db).is_file():
        con = _connect(db)
        try:
            if con.execute("select count(*) from models where model = ?", [model]).fetchall()[0][0]:
                yield con
                return
        finally:
            con.close()
    from archsql.evaluator import evaluate
    from archsql.store import write_store

    tables = evaluate(model).tables  # an unknown model is a located SpecError here
    with tempfile.TemporaryDirectory(prefix="archsql-plan-") as tmp:
        path = Path(tmp) / "plan.duckdb"
        write_store(path, tables)
        con = _connect(path)
        try:
            yield con
        finally:
            con.close()


def _connect(db: str | Path) -> duckdb.DuckDBPyConnection:
    from archsql.store import connect

    con = connect(db, read_only=True)
    views = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    if "kernel_plan" not in views:
        con.close()
        raise StoreError(
            f"the store {db} has no kernel_plan view (built by an earlier archsql)",
            [Issue("refresh its views", hint="run `archsql build` (or delete the file and build again)")],
        )
    return con


def _check_name(con: duckdb.DuckDBPyConnection, what: str, name: str, sql: str) -> None:
    known = [r[0] for r in con.execute(sql).fetchall()]
    if name not in known:
        message, hint = unknown_name(what, name, known)
        raise CorpusError(message, [Issue(message, hint=hint)])
