"""Measured next to speed of light: the ``measured_vs_sol`` and ``step_measured`` views of one
model × deployment, queried with the names checked (``archsql corpus vs-sol``).

The numbers are the views'; this module only chooses the rows: the workloads (default: every
workload of the store), the policy — a framework's own newest version (``framework='vllm'``)
or the fastest correct row of any library (``framework=None``: the envelope).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql.errors import CorpusError, Issue, StoreError, unknown_name

DEFAULT_DEPLOYMENT = "1xH200-single"

_ORDER = {
    "measured_vs_sol": "order by workload, sol_s desc, uid",
    "step_measured": "order by phase desc, batch, context, workload",
}


def measured_vs_sol(
    db: str | Path,
    model: str,
    *,
    deployment: str = DEFAULT_DEPLOYMENT,
    workloads: Sequence[str] | None = None,
    framework: str | None = None,
    step: bool = False,
) -> pa.Table:
    """Rows of ``measured_vs_sol`` (``step=True``: ``step_measured``) for ``model`` on
    ``deployment`` at ``workloads`` under the ``framework``'s policy (None: the envelope)."""
    from archsql.kernel_corpus.storage import connect_read_only

    con = connect_read_only(db)  # a store without a corpus says so
    try:
        views = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        if "measured_vs_sol" not in views:
            raise StoreError(
                f"the store {db} has no measured_vs_sol view (its corpus views are from an earlier archsql)",
                [Issue("refresh them", hint="run `archsql build` and then `archsql corpus sync`")],
            )
        _check(con, "model", [model], "select model from models")
        _check(con, "deployment", [deployment], "select deployment from deployments")
        if workloads:
            _check(con, "workload", list(workloads), "select workload from workloads")
        gpu = con.execute("select gpu from deployments where deployment = ?", [deployment]).fetchall()[0][0]
        if framework is not None:
            # the libraries measured_vs_sol offers a framework policy for: those with rows on the GPU
            offered = [
                r[0]
                for r in con.execute(
                    "select distinct library from base_kernel_corpus where gpu = ? and library is not null", [gpu]
                ).fetchall()
            ]
            if framework not in offered:
                message, hint = unknown_name(f"framework on {gpu}", framework, offered)
                if not offered:
                    hint = f"the corpus has no rows for the GPU {gpu}; import some (archsql corpus import ...)"
                raise CorpusError(message, [Issue(message, hint=hint)])
        view = "step_measured" if step else "measured_vs_sol"
        where = ["model = $model", "deployment = $deployment"]
        params: dict[str, object] = {"model": model, "deployment": deployment}
        if workloads:
            where.append("list_contains($workloads, workload)")
            params["workloads"] = list(workloads)
        if framework is None:
            where.append("policy = 'envelope'")
        else:
            where.append("policy = 'framework' and framework = $framework")
            params["framework"] = framework
        sql = f"select * from {view} where {' and '.join(where)} {_ORDER[view]}"
        return con.sql(sql, params=params).to_arrow_table()
    finally:
        con.close()


def _check(con: duckdb.DuckDBPyConnection, what: str, names: list[str], sql: str) -> None:
    known = [r[0] for r in con.execute(sql).fetchall()]
    for name in names:
        if name not in known:
            message, hint = unknown_name(what, name, known)
            raise CorpusError(message, [Issue(message, hint=hint)])
