"""The Python API: build the store, query it, explain a quantity.

Everything returns Arrow tables (``.to_polars()`` via :func:`to_polars`) or small frozen
records.  Numbers come from the store's views; formulas from the same sympy expressions
the stored term rows were made of.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from archsql.errors import ArchsqlError, Issue, QueryError, UnsafeSQLError
from archsql.schema.tables import PHASES, TABLES

if TYPE_CHECKING:  # the evaluator and sympy load on first use: a query does not need them
    import sympy

    from archsql.evaluator import Analysis


def evaluate(model: Any, *args: Any, **kwargs: Any) -> Analysis:
    """:func:`archsql.evaluator.evaluate` (the evaluator loads on first use)."""
    from archsql.evaluator import evaluate as evaluate_model

    return evaluate_model(model, *args, **kwargs)


DEFAULT_DB_NAME = "archsql.duckdb"


def default_db() -> Path:
    """The embedded default store: ``$ARCHSQL_DB`` or ``./archsql.duckdb``."""
    return Path(os.environ.get("ARCHSQL_DB", DEFAULT_DB_NAME))


def catalog() -> list[str]:
    """Names of the bundled models."""
    from archsql.specs import default_library

    return default_library().catalog()


@dataclass(frozen=True)
class BuildReport:
    db: Path
    models: tuple[str, ...]
    seconds: float
    evaluate_seconds: dict[str, float]
    # what the evaluation noticed without refusing a model (archsql.errors.Issue): config keys
    # its spec never read (archsql.evaluator.bind.unread_config_warnings)
    warnings: tuple = ()
    notes: tuple[str, ...] = ()  # tables of an older layout brought up to date (store_layout)
    repaired: tuple[str, ...] = ()  # models evaluated again to repair the store, not asked for


def evaluate_all(
    models: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    replace_catalog: bool = False,
    library=None,
    warnings: list | None = None,
) -> tuple[dict[str, pa.Table], dict[str, float]]:
    """Evaluate models and concatenate their tables (schema order kept).  A name given twice
    is evaluated once; two specs of one model name, or a spec file named like a catalog model
    (it would replace the catalog model's rows) without ``replace_catalog``, are a
    :class:`QueryError` before anything is written.  ``library``: where names are looked up
    (:func:`archsql.specs.load_library`, e.g. a user spec folder); ``warnings``: a list the
    evaluations' warnings are appended to."""
    from archsql.evaluator import evaluate

    names = list(dict.fromkeys(str(m) for m in models)) if models else catalog()
    known = set(catalog())
    parts: dict[str, list[pa.Table]] = {name: [] for name in TABLES}
    timings: dict[str, float] = {}
    origin: dict[str, str] = {}
    for name in names:
        t0 = time.perf_counter()
        analysis = evaluate(name, library)
        if warnings is not None:
            warnings.extend(analysis.warnings)
        if analysis.model in origin:
            raise QueryError(
                f"model '{analysis.model}' is given twice in one build: by {origin[analysis.model]} and by {name}",
                [Issue("give each model once (a spec's `model:` field names it)")],
            )
        origin[analysis.model] = name
        from_catalog = name in known and (library is None or _same_file(library.model_path(name), name))
        if not from_catalog and analysis.model in known and not replace_catalog:
            raise QueryError(
                f"{name} names its model '{analysis.model}', a catalog model: building it would replace "
                "the catalog model's rows",
                [Issue("give the spec another `model:` name, or build with --replace-catalog to replace it")],
            )
        timings[analysis.model] = time.perf_counter() - t0
        for table, value in analysis.tables.items():
            parts[table].append(value)
        if progress:
            progress(analysis.model)
    return {name: pa.concat_tables(p) if p else TABLES[name].empty_table() for name, p in parts.items()}, timings


def build(
    models: Sequence[str] | None = None,
    db: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    replace_catalog: bool = False,
    specs: str | Path | None = None,
) -> BuildReport:
    """Evaluate ``models`` (default: the whole catalog) into the DuckDB store ``db``; a spec
    file named like a catalog model replaces it only with ``replace_catalog``.  ``specs``: a
    user spec folder (:func:`user_library`) whose models are built by name — all of them when
    ``models`` is empty.  A damaged store, or one of an older layout, is repaired on the way:
    its other models are evaluated again (:func:`archsql.store.repair_plan`)."""
    from archsql.store import build_lock, repair_plan, write_store

    t0 = time.perf_counter()
    db = Path(db) if db else default_db()
    with build_lock(db):  # a second build of this store is refused before it evaluates anything
        library = user_library(specs) if specs is not None else None
        if library is not None and not models:
            models = user_models(specs)
        names = list(models) if models else catalog()
        repair = repair_plan(db, names, catalog())  # a damaged or older store: its other models too
        found: list = []
        tables, timings = evaluate_all(
            [*names, *repair], progress, replace_catalog=replace_catalog, library=library, warnings=found
        )
        notes = write_store(db, tables)
    repaired = tuple(timings)[len(dict.fromkeys(str(n) for n in names)) :]  # evaluated in order: asked, then repair
    return BuildReport(db, tuple(timings), time.perf_counter() - t0, timings, tuple(found), tuple(notes), repaired)


def _same_file(path: Path, name: str) -> bool:
    """Whether ``path`` is the catalog's spec of model ``name``."""
    from archsql.specs import default_library

    catalog_path = default_library().model_files.get(name)
    return catalog_path is not None and Path(path).resolve() == catalog_path.resolve()


def user_library(specs: str | Path):
    """The library with a user spec folder added: its model ``.yaml`` files (in the folder or
    its ``models/``) by name, beside the catalog, and its ``components/`` beside the library's.
    A model's ``config:`` path is read relative to its spec file (:func:`archsql.evaluator.bind.config_path`)."""
    from archsql.specs import load_library

    folder = Path(specs)
    if not folder.is_dir():
        raise QueryError(
            f"spec folder {folder} does not exist",
            [Issue("give a folder holding model .yaml files (and optionally components/)")],
        )
    models = folder / "models" if (folder / "models").is_dir() else folder
    components = folder / "components" if (folder / "components").is_dir() else None
    return load_library(components_dir=components, models_dir=models)


def user_models(specs: str | Path) -> list[str]:
    """The names of the model specs in a user spec folder (the stems of its ``.yaml`` files)."""
    folder = Path(specs)
    models = folder / "models" if (folder / "models").is_dir() else folder
    names = sorted(p.stem for p in models.glob("*.yaml"))
    if not names:
        raise QueryError(
            f"spec folder {folder} holds no model .yaml",
            [Issue(f"put a model spec (<name>.yaml) in {models}")],
        )
    return names


def refresh(db: str | Path | None = None) -> list[str]:
    """Compute the store's derived tables again (the rows of its views that queries read
    while they match the store: :mod:`archsql.store`); returns the views computed.  Needed
    only after the parameter tables were changed outside archsql, to make queries fast again:
    until then queries read the live views, which are always current."""
    from archsql.store import refresh_store

    return refresh_store(Path(db) if db else default_db())


def check_read_only(sql: str, con: Any = None) -> None:
    """Reject statements that could change the store or touch the file system.

    The statements are split and typed by DuckDB's own parser (the one that will run them,
    and no import: a point query from the CLI starts in a fraction of a second); only
    queries (SELECT, VALUES, DESCRIBE, SHOW, SUMMARIZE, FROM/TABLE) pass.  Their syntax
    tree (``json_serialize_sql``) is searched for file-reading functions.  The read-only
    connection and ``enable_external_access = false`` (:func:`query`) refuse the rest."""
    import duckdb

    own = con is None
    if own:
        con = duckdb.connect()  # an empty in-memory database: parsing only
    try:
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            raise QueryError(f"cannot parse SQL: {_first_line(exc)}") from None
        for stmt in statements:
            if stmt.type != duckdb.StatementType.SELECT:
                kind = stmt.type.name.replace("_", " ")
                raise UnsafeSQLError(f"only read queries are allowed here, got a {kind} statement; {_instead(sql)}")
        ((tree,),) = con.execute("select json_serialize_sql(?)", [sql]).fetchall()  # (all: the result is done)
    finally:
        if own:
            con.close()
    for name in sorted(set(_FUNCTION_NAME.findall(tree)) & _FILE_FUNCS):
        raise UnsafeSQLError(f"'{name}' reads or writes files; archsql sql only queries the store")


_FUNCTION_NAME = re.compile(r'"function_name":"([^"]+)"')


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# the command that changes each parameter table (archsql/cli_params.py; the same in this module)
WRITE_COMMANDS = {
    "deployments": "archsql deployment add|rm (api.add_deployment, api.remove_deployments)",
    "deployment_mesh": "archsql deployment add --tp 4 --dp 2 … (api.add_deployment)",
    "deployment_frameworks": "archsql deployment add --framework … (api.add_deployment)",
    "workloads": "archsql workload add|rm (api.add_workload, api.remove_workloads)",
    "workload_images": "archsql workload add --image-patches … (api.add_workload)",
    "gpus": "archsql gpu add (api.add_gpu)",
}


def _instead(sql: str) -> str:
    """What to run instead of a write statement: the parameter command of the table it names
    (sqlglot finds the tables; it loads only on this error path)."""
    import sqlglot
    from sqlglot import exp

    try:
        tables = [t.name for stmt in sqlglot.parse(sql, read="duckdb") if stmt for t in stmt.find_all(exp.Table)]
    except sqlglot.errors.SqlglotError:
        tables = []
    for name in tables:
        if name.lower() in WRITE_COMMANDS:
            return f"to change {name.lower()} use {WRITE_COMMANDS[name.lower()]}"
    return (
        "the store changes through archsql build and the parameter commands "
        "(archsql deployment|workload|gpu add|rm; in Python archsql.store.insert_rows on a writable connection)"
    )


_FILE_FUNCS = {
    "read_csv",
    "read_csv_auto",
    "read_parquet",
    "read_json",
    "read_json_auto",
    "read_text",
    "read_blob",
    "glob",
    "copy",
}


# Folders a read-only query may read besides the store file: packages above the api (the
# kernel corpus, whose view reads its Parquet partitions) register a function of the store
# path on import, so the core query path imports none of them.
_READABLE_DIRS: list[Callable[[Path], Path]] = []


def register_readable_dir(folder_of: Callable[[Path], Path]) -> None:
    """Admit ``folder_of(store path)`` to every read-only query (idempotent)."""
    if folder_of not in _READABLE_DIRS:
        _READABLE_DIRS.append(folder_of)


# Functions of (connection, store path) run on every read-only query connection before file
# access is disabled: the kernel corpus points its view at the folder beside the store as it
# is now, so a store moved or copied with its corpus folder keeps answering.
_QUERY_HOOKS: list[Callable] = []


def register_query_hook(hook: Callable) -> None:
    """Run ``hook(con, store path)`` on every read-only query connection (idempotent)."""
    if hook not in _QUERY_HOOKS:
        _QUERY_HOOKS.append(hook)


def _allow_reads(con, db: Path) -> None:
    """Admit the registered folders to a connection that is about to disable file access."""
    if not _READABLE_DIRS:
        return
    (enabled,) = con.execute("select current_setting('enable_external_access')").fetchone()
    if not enabled:  # another connection of this process to the store locked its instance down
        return  # already, with these folders (DuckDB shares one instance per file and process)
    folders = ", ".join("'" + str(f(db)).replace("'", "''") + "/'" for f in _READABLE_DIRS)
    con.execute(f"set allowed_directories = [{folders}]")


def query(sql: str, db: str | Path | None = None) -> pa.Table:
    """Run a read-only query against the store; returns an Arrow table."""
    return _query(sql, db, checked=False)[0]


def query_checked(sql: str, db: str | Path | None = None) -> tuple[pa.Table, list[dict]]:
    """:func:`query`, and the rows of ``parameter_checks`` (the parameter rows every answer
    leaves out: :func:`invalid_parameter_rows`), read on the same connection."""
    return _query(sql, db, checked=True)


def _query(sql: str, db: str | Path | None, *, checked: bool) -> tuple[pa.Table, list[dict]]:
    import duckdb

    from archsql.store import notify_stale
    from archsql.store_hold import held

    path = Path(db) if db else default_db()
    try:
        # the store's read-only connection, held open between the queries of this process
        # while its file is unchanged (archsql.store_hold: never a stale figure)
        with held(path, query_connection) as (con, state):
            notify_stale(path, state.freshness)  # read live (the CLI says so) while the derived rows are stale
            check_read_only(sql, con)  # DuckDB's parser: the query typed before anything runs
            invalid = _parameter_check_rows(con) if checked else []
            for hook in _QUERY_HOOKS:
                hook(con, path)
            rel = con.sql(sql)
            return (rel.to_arrow_table() if rel is not None else pa.table({})), invalid
    except duckdb.PermissionException as exc:
        raise UnsafeSQLError(f"archsql sql only queries the store: {exc}") from None
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {exc}") from None


@dataclass
class QueryState:
    """What a held query connection (:func:`query_connection`) knows of its store, which
    cannot change while the connection is held (:mod:`archsql.store_hold`)."""

    freshness: Any  # archsql.store.Freshness: the derived tables' state when it was opened
    graph: Any = None  # archsql.store.ViewGraph, read on first use (a sweep's order of views)


def query_connection(path: Path) -> tuple[Any, QueryState]:
    """A read-only connection for queries: every current derived table shadows its view
    (:func:`archsql.store.use_derived`), the registered folders are readable and nothing
    else on the file system or network is.  Returns it with its :class:`QueryState`; held
    between queries by :func:`archsql.store_hold.held`."""
    from archsql.store import connect, use_derived

    con = connect(path, read_only=True, derived=False)
    try:
        state = use_derived(con, path, None, notify=False)
        _allow_reads(con, path)  # registered folders (the kernel corpus partitions), nothing else
        con.execute("set enable_external_access = false")  # no file/network reads ('x.csv', glob())
    except BaseException:
        con.close()
        raise
    return con, QueryState(state)


def release(db: str | Path | None = None) -> None:
    """Close the read-only connection this process holds open between queries of the store
    ``db`` (every store: None; :mod:`archsql.store_hold`).  Needed only before opening the
    same file with a plain ``duckdb.connect(path)`` in this process within
    ``ARCHSQL_QUERY_HOLD_S`` seconds (1 s by default) of a query; archsql's own writers
    release it themselves."""
    from archsql.store_hold import release as release_held

    release_held(db)


def invalid_parameter_rows(db: str | Path | None = None) -> list[dict]:
    """The rows of ``parameter_checks``: parameter rows that break a rule, which the views
    leave out (empty for a store whose views predate the check)."""
    from archsql.store import connect

    con = connect(Path(db) if db else default_db(), read_only=True)
    try:
        return _parameter_check_rows(con)
    finally:
        con.close()


def _parameter_check_rows(con) -> list[dict]:
    found = con.execute("select 1 from information_schema.tables where table_name = 'parameter_checks'").fetchall()
    if not found:
        return []
    rel = con.sql("select * from parameter_checks order by parameter_table, row_key, rule")
    return rel.to_arrow_table().to_pylist()


EXPORT_SCHEMA = pa.schema([("name", pa.string()), ("kind", pa.string()), ("rows", pa.int64()), ("file", pa.string())])


def export_parquet(
    directory: str | Path,
    db: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> pa.Table:
    """Write every table and view of the store as ``directory/<name>.parquet`` (DuckDB's own
    ``COPY … TO … (format parquet)``); returns one row per file (name, kind, rows, file).

    Views are copied from the store's derived tables while these are current (the rows
    queries read, never computed again); a view that is not stored (an int view private to
    one report) is computed once from the stored views it reads.  When the derived tables
    are stale, every view is computed once from the tables (each from the computed rows of
    the views it reads).  ``progress(name, done, total)`` is called after each file."""
    from archsql.store import connect, freshness
    from archsql.views import computed_once

    path = Path(db) if db else default_db()
    out = Path(directory)
    con = connect(path, read_only=True)
    try:
        relations = con.execute(
            "select table_name, table_type from information_schema.tables "
            "where table_catalog = current_database() and table_schema = 'main' order by table_name"
        ).fetchall()
        out.mkdir(parents=True, exist_ok=True)
        con.execute("set enable_progress_bar = false")
        con.execute("set preserve_insertion_order = false")  # rows in any order: the writer runs on every core
        files = []
        live = contextlib.nullcontext() if freshness(con).fresh else computed_once(con)
        with live:
            for i, (name, kind) in enumerate(relations, start=1):
                file = out / f"{name}.parquet"
                quoted = str(file).replace("'", "''")
                name_sql = name.replace('"', '""')
                (rows,) = con.execute(f"copy (select * from \"{name_sql}\") to '{quoted}' (format parquet)").fetchone()
                files.append(
                    {"name": name, "kind": "view" if kind == "VIEW" else "table", "rows": rows, "file": str(file)}
                )
                if progress:
                    progress(name, i, len(relations))
    finally:
        con.close()
    return pa.Table.from_pylist(files, schema=EXPORT_SCHEMA)


def to_polars(table: pa.Table):
    import polars as pl

    return pl.from_arrow(table)


# ---------------------------------------------------------------------------- explain

QUANTITIES = ("flops", "params", "active_params", "cache_elements")


@dataclass(frozen=True)
class Explanation:
    model: str
    quantity: str
    phase: str | None
    node: str | None
    formula: str  # symbolic in model dims and runtime symbols
    bound: str  # model dims bound to numbers
    workload: dict[str, int]
    value: float


@functools.lru_cache(maxsize=64)
def _evaluated(model: str) -> Analysis:
    from archsql.evaluator import evaluate

    return evaluate(model)


def formula(
    model: str, quantity: str = "flops", phase: str = "prefill", node: str | None = None
) -> tuple[sympy.Expr, sympy.Expr]:
    """(symbolic, bound) sympy expressions of a model quantity — the expressions the stored
    term rows were made from.  ``bound`` keeps only the runtime symbols B, s, c.  Like the
    views, whole-model flops, active params and caches cover the base model (stacks of role
    mtp and mtp-role glue are left out); params count every tensor on disk."""
    if quantity not in QUANTITIES:
        from archsql.errors import unknown_name

        message, hint = unknown_name("quantity", quantity, QUANTITIES)
        raise QueryError(f"{message}; {hint}")
    if phase not in PHASES:
        raise QueryError(f"unknown phase '{phase}'; use one of {', '.join(PHASES)}")
    analysis = _evaluated(str(model))
    expr = _symbolic_total(analysis, quantity, phase, node)
    return expr, analysis.walks[phase].bind(expr)


def _symbolic_total(analysis: Analysis, quantity: str, phase: str, node: str | None) -> sympy.Expr:
    import sympy

    from archsql.evaluator.analysis import node_count

    w = analysis.walks[phase]
    results = w.results
    if node is not None:
        matches = [uid for uid in results if uid == node or uid.endswith(("." + node, "/" + node))]
        if not matches:
            from archsql.errors import unknown_name

            message, hint = unknown_name("node", node, results)
            raise QueryError(f"{analysis.model}: {message}; {hint}")
        results = {uid: results[uid] for uid in matches}
    total = sympy.Integer(0)
    for res in results.values():
        stack = w.program.stacks.get(res.node.stack) if res.node.stack else None
        in_base_model = (stack is None or stack.spec.role != "mtp") and res.node.role != "mtp"
        if not in_base_model and quantity != "params" and node is None:
            continue  # the base model does not run MTP layers; params count what is on disk
        count, active = node_count(w, res, symbolic=True)
        if quantity == "flops":
            total += res.flops * count
        elif quantity in ("params", "active_params"):
            elements = sum((sympy.Mul(*(a.expr for a in d.axes)) for d in res.weights), sympy.Integer(0))
            total += elements * (count if quantity == "params" else active)
        elif quantity == "cache_elements":  # a batch of B requests at context c, each cache with its law
            total += sum((fact.expr() for fact in res.caches), sympy.Integer(0)) * count
    return total


def explain(
    model: str,
    quantity: str = "flops",
    *,
    node: str | None = None,
    phase: str = "prefill",
    batch: int = 1,
    new_tokens: int | None = None,
    context: int | None = None,
    image_patches: int = 0,
) -> Explanation:
    """The formula of a model quantity (whole model, or nodes whose uid ends with ``node``)
    and its value at a workload (``image_patches``: v, a vision tower's patches per request;
    shown in the workload only when the formula reads it)."""
    import sympy

    from archsql.evaluator.terms import display
    from archsql.schema.expr import RUNTIME_SYMBOLS

    expr, bound = formula(model, quantity, phase, node)
    s = new_tokens if new_tokens is not None else (1 if phase == "decode" else 2048)
    c = context if context is not None else (s if phase == "prefill" else 2048)
    if c < s:
        raise QueryError(f"context ({c}) must be at least the new tokens ({s}): c counts cached plus new tokens")
    workload = {"B": batch, "s": s, "c": c}
    if RUNTIME_SYMBOLS["v"] in bound.free_symbols:
        workload["v"] = image_patches
    value = bound.xreplace({RUNTIME_SYMBOLS[k]: sympy.Integer(v) for k, v in {**workload, "v": image_patches}.items()})
    return Explanation(
        _evaluated(str(model)).model,
        quantity,
        phase if quantity in ("flops", "cache_elements") else None,
        node,
        display(expr),
        display(bound),
        workload,
        float(value),
    )


# ---------------------------------------------------------------------------- parameter tables


def _store(db: str | Path | None) -> Path:
    return Path(db) if db else default_db()


def add_deployment(deployment: str, db: str | Path | None = None, **fields) -> pa.Table:
    """Add a deployment (archsql.parameters.add_deployment: fields by column or mesh-axis name,
    ``like``, ``replace``); checked by deployment_checks before it is kept.  Returns its row."""
    from archsql import parameters

    return parameters.add_deployment(_store(db), deployment, **fields)


def deployments(db: str | Path | None = None) -> pa.Table:
    """Every deployment of the store, one row each (mesh: the degrees above 1)."""
    from archsql import parameters

    return parameters.list_deployments(_store(db))


def remove_deployments(names: Sequence[str], db: str | Path | None = None) -> list[str]:
    """Remove deployments (mesh and framework rows with them); an unknown name removes nothing."""
    from archsql import parameters

    return parameters.remove_deployment_rows(_store(db), list(names))


def add_workload(workload: str, db: str | Path | None = None, **fields) -> tuple[pa.Table, list[str]]:
    """Add a workload (archsql.parameters.add_workload: phase, batch, context, new_tokens,
    image_patches, replace); returns its row and warnings (a context beyond a model's maximum)."""
    from archsql import parameters

    return parameters.add_workload(_store(db), workload, **fields)


def workloads(db: str | Path | None = None) -> pa.Table:
    """Every workload of the store with its image patches per request."""
    from archsql import parameters

    return parameters.list_workloads(_store(db))


def remove_workloads(names: Sequence[str], db: str | Path | None = None) -> list[str]:
    """Remove workloads (their image rows with them); an unknown name removes nothing."""
    from archsql import parameters

    return parameters.remove_workload_rows(_store(db), list(names))


def add_gpu(gpu: str, db: str | Path | None = None, *, like: str | None = None, replace: bool = False, **values):
    """Add a GPU row (gpus.csv columns by name; ``like`` copies another GPU's figures, not its
    sources); returns it."""
    from archsql import parameters

    return parameters.add_gpu(_store(db), gpu, like=like, replace=replace, values=values)


def gpus(db: str | Path | None = None) -> pa.Table:
    """Every GPU row of the store."""
    from archsql import parameters

    return parameters.list_gpus(_store(db))


__all__ = [
    "ArchsqlError",
    "BuildReport",
    "Explanation",
    "add_deployment",
    "add_gpu",
    "add_workload",
    "build",
    "catalog",
    "check_read_only",
    "default_db",
    "deployments",
    "evaluate",
    "explain",
    "export_parquet",
    "formula",
    "gpus",
    "query",
    "query_checked",
    "refresh",
    "release",
    "remove_deployments",
    "remove_workloads",
    "to_polars",
    "workloads",
]


def serve_estimate(
    model: str,
    deployment: str,
    framework: str,
    *,
    isl: int,
    osl: int,
    concurrency: int | Sequence[int],
    acceptance_rate: float | None = None,
    db: str | Path | None = None,
    prefill_deployment: str | None = None,
    prefill_instances: int | None = None,
    decode_instances: int | None = None,
    kv_link_bytes_per_s: float | None = None,
    kv_link_latency_s: float | None = None,
) -> pa.Table:
    """TTFT and TPOT (``serving_estimates`` rows) of ``model`` on ``deployment`` served by
    ``framework`` (``'sglang@0.5.9'``; no version: ``'*'``, the newest defaults listed) at
    each client ``concurrency`` with ``isl`` / ``osl`` tokens per request (docs/serving.md).
    With ``prefill_deployment``: disaggregated prefill/decode, ``prefill_instances`` (x) of
    it and ``decode_instances`` (y) of ``deployment``, the KV cache crossing a link of
    ``kv_link_bytes_per_s`` and ``kv_link_latency_s`` (defaults: the GPUs' scale-out NIC, 0).
    A question archsql cannot express is a :class:`~archsql.errors.QueryError` naming it."""
    from archsql import serving

    name, version = serving.parse_framework(framework)
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    cases = [
        dict(
            serving_case=f"c{c}",
            model=model,
            deployment=deployment,
            framework=name,
            version=version,
            isl=isl,
            osl=osl,
            concurrency=c,
            acceptance_rate=acceptance_rate,
            prefill_deployment=prefill_deployment,
            prefill_instances=prefill_instances,
            decode_instances=decode_instances,
            kv_link_bytes_per_s=kv_link_bytes_per_s,
            kv_link_latency_s=kv_link_latency_s,
        )
        for c in levels
    ]
    return serving.estimate(_store(db), cases)
