"""The store's parameter tables without raw SQL: add, list and remove deployments and
workloads, add and list GPUs.

Each ``add_*`` checks its row before anything is kept and raises one
:class:`~archsql.errors.ParameterError` listing every problem, each located at its field
(``deployments.gpu``), with a "did you mean" for a misspelt name.  The rules are not written
twice: a deployment is inserted inside a transaction and read back through the
``deployment_checks`` view (the degrees that must multiply to the GPU count, cp kind, nodes,
dtypes, memory fraction, weight profile — archsql/views/reports/deployment_checks.sql, whose
mesh axes come from :mod:`archsql.schema.parallel`); a problem rolls the transaction back.
A GPU row is checked by the rules of ``gpus.csv`` (:func:`archsql.gpus.table.parse_gpu_row`).
A workload is checked here (phase, batch, new tokens, context, image patches); a context
beyond the maximum of a model in the store is not an error (the workload serves every
model) but is returned as a warning naming those models, as ``step_sol.beyond_max_context``
flags their rows.

The listings are queries of the parameter tables; the same functions are exported by
:mod:`archsql.api` and run by ``archsql deployment|workload|gpu`` (archsql/cli_params.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from archsql.errors import Issue, ParameterError, did_you_mean, unknown_name
from archsql.gpus.table import GPU_SCHEMA, parse_gpu_row
from archsql.schema.parallel import AXES, MESH_AXES, fill_degrees
from archsql.schema.tables import PARAMETER_TABLES, PHASES
from archsql.store import (
    DEPLOYMENT_TABLES,
    WORKLOAD_TABLES,
    Change,
    connect,
    deployment_fields,
    insert_deployments,
    insert_rows,
    refresh_changed,
    remove_deployments,
    remove_workloads,
    snapshot,
)

INT64_MAX = 2**63 - 1
DEPLOYMENT_COLUMNS = PARAMETER_TABLES["deployments"].names
# the fields of a deployment besides its name: the deployments columns, the mesh axes, the framework
DEPLOYMENT_FIELDS = (*DEPLOYMENT_COLUMNS[1:], *AXES, "framework")
# a deployment written without --like: one vLLM engine, weights and caches in bf16
DEPLOYMENT_DEFAULTS = {"cp_kind": "none", "weight_dtype": "bf16", "act_dtype": "bf16", "kv_dtype": "bf16"}
DEFAULT_FRAMEWORK = "vllm"


def _names(con: duckdb.DuckDBPyConnection, table: str, key: str) -> list[str]:
    return [r[0] for r in con.execute(f"select {key} from {table} order by {key}").fetchall()]


def _check_name(kind: str, name: object, issues: list[Issue], path: str) -> None:
    from archsql.output import printable

    if not isinstance(name, str) or not name.strip():
        issues.append(Issue(f"a {kind} needs a name", path=path, got=repr(name)))
    elif printable(name) != name or name != name.strip():
        issues.append(
            Issue(
                f"a {kind} name is printable text without control characters or edge spaces",
                path=path,
                got=printable(repr(name)),
            )
        )


def _check_int(value: object, field: str, issues: list[Issue], *, minimum: int, why: str = "") -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        issues.append(Issue(f"{field.split('.')[-1]} must be an integer", path=field, got=repr(value)))
    elif not minimum <= value <= INT64_MAX:
        bound = f"at least {minimum}" if value < minimum else f"at most {INT64_MAX}"
        issues.append(Issue(f"{field.split('.')[-1]} must be {bound}{why}", path=field, got=str(value)))


def _refuse(message: str, issues: list[Issue]) -> None:
    if issues:
        raise ParameterError(message, issues)


def _listed(db: Path, sql: str, key: str, names: Sequence[str] | None) -> pa.Table:
    """The rows of ``sql`` (a ``{where}`` slot before its ``order by``): all of them, or those
    whose ``key`` is one of ``names``."""
    con = connect(db, read_only=True)
    try:
        if names is None:
            return con.sql(sql.format(where="")).to_arrow_table()
        where = f"where {key} in (select unnest(?::varchar[]))"
        return con.sql(sql.format(where=where), params=[list(names)]).to_arrow_table()
    finally:
        con.close()


@contextmanager
def _writing(db: Path, change: Callable[[duckdb.DuckDBPyConnection], Change]) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction on the store: committed, then the derived tables brought up to date
    (docs/store.md), when the block ends; rolled back when it raises.  ``change(con)``, called
    after the block, says what it wrote: only those keys' derived rows are computed again
    (:func:`archsql.store.refresh_changed`)."""
    con = connect(db, read_only=False)
    try:
        before = snapshot(con)
        con.begin()
        try:
            yield con
            written = change(con)
        except BaseException:
            con.rollback()
            raise
        con.commit()
        con.begin()  # the derived rows of the write, in a transaction of their own: all or none
        try:
            refresh_changed(con, before, written)
        except BaseException:
            con.rollback()  # the derived tables as they were: stale, so read live, never wrong
            raise
        con.commit()
    finally:
        con.close()


# ---------------------------------------------------------------------------- deployments


def add_deployment(
    db: Path, deployment: str, *, like: str | None = None, replace: bool = False, **fields: Any
) -> pa.Table:
    """Add the deployment ``deployment`` to the store and return its row.

    ``fields``: any of DEPLOYMENT_FIELDS — the ``deployments`` columns (gpu, gpus, cp_kind,
    nodes, weight_dtype, act_dtype, kv_dtype, usable_memory_fraction, weight_profile,
    speculative_tokens), the degree of each mesh axis (tp=4, ep=8; an axis not given has
    degree 1) and ``framework``.  With ``like``, every field not given is that deployment's.
    Without it: cp_kind none, bf16 weights/activations/KV, the weight profile of the weight
    dtype, the vLLM memory fraction, ``gpus`` the product of the attention degrees given
    (tp × cp × dp × pp) when not given, and dp and moe_tp, when not given, what the other
    degrees of their span leave of the GPUs (:func:`archsql.schema.parallel.fill_degrees`, the
    sweep's rule): ``tp=8`` is tp 8 and moe_tp 8 on 8 GPUs.  ``replace``: an existing deployment of that name is
    replaced instead of refused."""
    fields = {k: v for k, v in fields.items() if v is not None}
    issues: list[Issue] = []
    _check_name("deployment", deployment, issues, "deployments.deployment")
    for key in fields:
        if key not in DEPLOYMENT_FIELDS:
            issues.append(
                Issue(
                    f"unknown deployment field '{key}'", path="deployments", hint=did_you_mean(key, DEPLOYMENT_FIELDS)
                )
            )
    for axis in AXES:
        _check_int(fields.get(axis), f"deployment_mesh.{axis}", issues, minimum=1)
    for column in ("gpus", "nodes"):
        _check_int(fields.get(column), f"deployments.{column}", issues, minimum=1)
    _check_int(fields.get("speculative_tokens"), "deployments.speculative_tokens", issues, minimum=0)
    _refuse(f"deployment '{deployment}' not added", issues)

    with _writing(db, lambda _: Change.of(DEPLOYMENT_TABLES, deployment=[deployment])) as con:
        existing = _names(con, "deployments", "deployment")
        if like is not None and like not in existing:
            message, hint = unknown_name("deployment", like, existing)
            issues.append(Issue(message, path="like", hint=hint))
        if deployment in existing and not replace:
            issues.append(
                Issue(
                    f"deployment '{deployment}' is already in the store",
                    path="deployments.deployment",
                    hint=f"remove it first (archsql deployment rm {deployment}) or replace it (--replace)",
                )
            )
        if "gpu" in fields:
            gpus = _names(con, "gpus", "gpu")
            if fields["gpu"] not in gpus:
                message, hint = unknown_name("GPU", fields["gpu"], gpus)
                issues.append(Issue(message, path="deployments.gpu", hint=hint + " (archsql gpu list)"))
        elif like is None:
            issues.append(Issue("a deployment needs a GPU", path="deployments.gpu", hint="give gpu (or like)"))
        if "framework" in fields:
            frameworks = _names(con, "frameworks", "framework")
            if fields["framework"] not in frameworks:
                message, hint = unknown_name("framework", fields["framework"], frameworks)
                issues.append(Issue(message, path="deployment_frameworks.framework", hint=hint))
        _refuse(f"deployment '{deployment}' not added", issues)

        row = dict(fields)
        if like is None:
            row = {**DEPLOYMENT_DEFAULTS, **row}
            row.setdefault("weight_profile", row["weight_dtype"])
            row.setdefault("framework", DEFAULT_FRAMEWORK)
            given = {axis: row.pop(axis) for axis in AXES if axis in row}
            if "gpus" not in row:  # the attention degrees given (dp, the filled axis, 1 unless given)
                row["gpus"] = math.prod(given.get(a.name, a.default) for a in MESH_AXES if "attention" in a.spans)
            row.update(fill_degrees(row["gpus"], given))
        if like is not None:  # read before a replaced deployment is removed: it may copy itself
            row = {**deployment_fields(con, like), **row}
        if deployment in existing:
            remove_deployments(con, [deployment])
        insert_deployments(con, [{**row, "deployment": deployment}])
        problems = con.execute(
            "select rule, problem, fix from deployment_checks where deployment = ? order by rule", [deployment]
        ).fetchall()
        issues = [Issue(problem, path=f"deployments ({rule})", hint=fix) for rule, problem, fix in problems]
        _refuse(f"deployment '{deployment}' not added: it breaks the layout rules (deployment_checks)", issues)
    return list_deployments(db, [deployment])


_DEPLOYMENTS_SQL = """
select
    d.deployment,
    d.gpu,
    d.gpus,
    coalesce(
        (select string_agg(m.axis || m.degree, '·' order by g.position)
         from deployment_mesh as m
         inner join (select distinct axis, position from parallel_groups) as g on g.axis = m.axis
         where m.deployment = d.deployment and m.degree <> 1),
        'single'
    ) as mesh,
    d.cp_kind,
    d.nodes,
    d.weight_dtype,
    d.act_dtype,
    d.kv_dtype,
    d.weight_profile,
    f.framework,
    d.usable_memory_fraction,
    d.speculative_tokens
from deployments as d
left join deployment_frameworks as f on f.deployment = d.deployment
{where}
order by d.deployment
"""


def list_deployments(db: Path, names: Sequence[str] | None = None) -> pa.Table:
    """The deployments (one row each; ``mesh`` the degrees above 1, e.g. tp4·dp2·ep8)."""
    return _listed(db, _DEPLOYMENTS_SQL, "d.deployment", names)


def remove_deployment_rows(db: Path, names: Sequence[str]) -> list[str]:
    """Remove deployments (with their mesh and framework rows); an unknown name removes
    nothing and is an error with a "did you mean"."""
    return _remove(db, "deployment", "deployments", names, remove_deployments, DEPLOYMENT_TABLES)


def _remove(db: Path, kind: str, table: str, names: Sequence[str], remove, tables: Sequence[str]) -> list[str]:
    with _writing(db, lambda _: Change.of(tables, **{kind: names})) as con:
        existing = _names(con, table, kind)
        issues = []
        for name in names:
            if name not in existing:
                message, hint = unknown_name(kind, name, existing)
                issues.append(Issue(message, path=f"{table}.{kind}", hint=hint))
        _refuse(f"nothing removed from {table}", issues)
        remove(con, names)
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------- workloads


def add_workload(
    db: Path,
    workload: str,
    *,
    phase: str,
    batch: int = 1,
    context: int,
    new_tokens: int | None = None,
    image_patches: int = 0,
    replace: bool = False,
) -> tuple[pa.Table, list[str]]:
    """Add a workload (B requests of s new tokens each, attending c tokens after the step;
    ``image_patches`` v per request) and return its row and warnings.  ``new_tokens``
    defaults to 1 in decode and to the context in prefill.  A warning names the models of
    the store whose maximum context the workload exceeds."""
    issues: list[Issue] = []
    _check_name("workload", workload, issues, "workloads.workload")
    if phase not in PHASES:
        message, hint = unknown_name("phase", phase, PHASES)
        issues.append(Issue(message, path="workloads.phase", hint=hint))
    if new_tokens is None:
        new_tokens = 1 if phase == "decode" else context
    _check_int(batch, "workloads.batch", issues, minimum=1, why=" (requests in the step)")
    _check_int(new_tokens, "workloads.new_tokens", issues, minimum=1, why=" (tokens computed per request)")
    _check_int(context, "workloads.context", issues, minimum=1, why=" (tokens attended after the step)")
    _check_int(image_patches, "workload_images.image_patches", issues, minimum=0)
    if not issues and context < new_tokens:
        issues.append(
            Issue(
                f"context ({context}) is less than the new tokens ({new_tokens})",
                path="workloads.context",
                hint="the context counts the cached tokens plus the new ones",
            )
        )
    _refuse(f"workload '{workload}' not added", issues)
    with _writing(db, lambda _: Change.of(WORKLOAD_TABLES, workload=[workload])) as con:
        existing = _names(con, "workloads", "workload")
        if workload in existing and not replace:
            _refuse(
                f"workload '{workload}' not added",
                [
                    Issue(
                        f"workload '{workload}' is already in the store",
                        path="workloads.workload",
                        hint=f"remove it first (archsql workload rm {workload}) or replace it (--replace)",
                    )
                ],
            )
        if workload in existing:
            remove_workloads(con, [workload])
        insert_rows(
            con,
            "workloads",
            [{"workload": workload, "phase": phase, "batch": batch, "new_tokens": new_tokens, "context": context}],
        )
        if image_patches:
            insert_rows(con, "workload_images", [{"workload": workload, "image_patches": image_patches}])
        beyond = con.execute(
            "select model, value from base_dims where dim = 'max_context' and value < ? order by model", [context]
        ).fetchall()
    warnings = []
    if beyond:
        shown = ", ".join(f"{m} ({int(v)})" for m, v in beyond[:8]) + (", …" if len(beyond) > 8 else "")
        warnings.append(
            f"context {context} is beyond the maximum context of {len(beyond)} model(s) in the store: {shown}; "
            "their rows of this workload are flagged (step_sol.beyond_max_context)"
        )
    return list_workloads(db, [workload]), warnings


def list_workloads(db: Path, names: Sequence[str] | None = None) -> pa.Table:
    """The workloads, with the image patches of each request (0: text only)."""
    sql = """
        select w.workload, w.phase, w.batch, w.new_tokens, w.context, coalesce(i.image_patches, 0) as image_patches
        from workloads as w left join workload_images as i on i.workload = w.workload
        {where} order by w.phase desc, w.batch, w.context, w.workload
    """
    return _listed(db, sql, "w.workload", names)


def remove_workload_rows(db: Path, names: Sequence[str]) -> list[str]:
    """Remove workloads (with their image rows); an unknown name removes nothing."""
    return _remove(db, "workload", "workloads", names, remove_workloads, WORKLOAD_TABLES)


# ---------------------------------------------------------------------------- GPUs

# not copied from the --like GPU: where the row's figures come from and its caveats
GPU_OWN_FIELDS = ("sources", "flags")


def add_gpu(
    db: Path, gpu: str, *, like: str | None = None, replace: bool = False, values: Mapping[str, object] | None = None
) -> pa.Table:
    """Add a GPU row (the columns of gpus.csv, archsql/gpus/table.py) and return it.  With
    ``like`` every figure not given is that GPU's, except its sources and flags: a new row
    cites its own (``sources`` is required)."""
    values = dict(values or {})
    issues: list[Issue] = []
    _check_name("GPU", gpu, issues, "gpus.gpu")
    for key in values:
        if key not in GPU_SCHEMA.names or key == "gpu":
            issues.append(Issue(f"unknown GPU column '{key}'", path="gpus", hint=did_you_mean(key, GPU_SCHEMA.names)))
    _refuse(f"GPU '{gpu}' not added", issues)
    with _writing(db, lambda con: _gpu_change(con, gpu)) as con:
        existing = _names(con, "gpus", "gpu")
        base: dict[str, object] = {}
        if like is not None:
            if like not in existing:
                message, hint = unknown_name("GPU", like, existing)
                _refuse(f"GPU '{gpu}' not added", [Issue(message, path="like", hint=hint)])
            base = con.sql("select * from gpus where gpu = ?", params=[like]).to_arrow_table().to_pylist()[0]
            for own in GPU_OWN_FIELDS:
                base.pop(own, None)
        if gpu in existing and not replace:
            _refuse(
                f"GPU '{gpu}' not added",
                [
                    Issue(
                        f"GPU '{gpu}' is already in the store",
                        path="gpus.gpu",
                        hint="give another name or replace it (--replace)",
                    )
                ],
            )
        merged = {**base, **values, "gpu": gpu}
        text = {c: "" if merged.get(c) is None else str(merged[c]) for c in GPU_SCHEMA.names}
        row, issues = parse_gpu_row(text, label="gpus")
        _refuse(f"GPU '{gpu}' not added", issues)
        if gpu in existing:
            con.execute("delete from gpus where gpu = ?", [gpu])
        insert_rows(con, "gpus", [row])
    return list_gpus(db, [gpu])


def _gpu_change(con: duckdb.DuckDBPyConnection, gpu: str) -> Change:
    """A GPU row written: the rows of the deployments on it, and of the GPU itself."""
    on_it = [r[0] for r in con.execute("select deployment from deployments where gpu = ?", [gpu]).fetchall()]
    return Change.of(["gpus"], deployment=on_it, gpu=[gpu])


def list_gpus(db: Path, names: Sequence[str] | None = None) -> pa.Table:
    """The GPU rows (every column of gpus.csv)."""
    return _listed(db, "select * from gpus {where} order by gpu", "gpu", names)
