"""The DuckDB store: evaluated tables, parameter tables, ``store_meta`` and the views.

``write_store`` loads the per-model Arrow tables the evaluator produced (zero-copy: each
table is registered with DuckDB and copied by ``CREATE TABLE … AS SELECT``), writes the
parameter tables with defaults when absent, records a ``store_meta`` row and (re)creates
the views.  Everything happens in one transaction, so a failed write leaves the store as
it was.  ``connect`` opens an existing store and says how to build one when there is none.

Derived tables.  After writing, ``write_store`` computes the rows of every view above the
``base`` layer once (in dependency order, each from its upstream views' computed rows) into
a table of the same name in the schema ``derived``, and records in ``derived.freshness`` a
fingerprint of everything those rows were computed from (:func:`fingerprint`).  ``connect``
recomputes the fingerprint (milliseconds) and, only when it equals the recorded one, makes
each derived table shadow its view on that connection (a TEMP VIEW of the same name, which
DuckDB resolves before the store's objects, inside other views' bodies too): a point query
then reads a few stored rows instead of evaluating every model × deployment × workload.
The rows are a cache of the views' own SQL, never a second formula.  When the fingerprint
differs (a parameter table changed through any client) it reads the live views (correct,
slower) until :func:`refresh` (``archsql refresh``, or a rebuild) computes them again.  Only
read-only connections are shadowed (nothing written through them can outdate a shadow); a
writable one and a plain ``duckdb.connect`` read the live views.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql import __version__
from archsql.errors import Issue, StoreError, did_you_mean
from archsql.schema.parallel import parallel_groups_table, split_deployment
from archsql.schema.tables import (
    CHECKPOINT_TABLES,
    PARAMETER_KEYS,
    PARAMETER_TABLES,
    REFERENCE_KEYS,
    REFERENCE_TABLES,
    TABLES,
)
from archsql.store_hold import release
from archsql.store_layout import (
    KEPT,
    contract_digest,
    drift,
    layout_error,
    migrate_kept,
    models_to_repair,
    recorded_version,
    stored_models,
)
from archsql.views import (
    DERIVED_SCHEMA,
    SOURCES_TABLE,
    ViewFile,
    create_views,
    macro_files,
    ordered_views,
    sources_current,
    unstored_views,
    view_files,
    view_graph,
    view_reads,
)

# What a store is written with: loaded when a store is written, not when one is read (the
# spec library, YAML and the evaluator stay out of a query's imports).


def _load_default(name: str) -> pa.Table:
    from archsql.defaults import load_default as load

    return load(name)


def _load_gpus() -> pa.Table:
    from archsql.gpus import load_gpus as load

    return load()


def _fusion_rules() -> pa.Table:
    from archsql.schema.fusion import fusion_rules_table
    from archsql.specs import FUSION_DIR

    return fusion_rules_table(FUSION_DIR)


def _serving(name: str) -> pa.Table:
    from archsql.schema import serving
    from archsql.specs import SERVING_DIR

    return getattr(serving, f"{name}_table")(SERVING_DIR)


def _gpu_architectures() -> pa.Table:
    from archsql.gpus.architectures import gpu_architectures_table

    return gpu_architectures_table()


_DEFAULTS = {
    "workloads": lambda: _load_default("workloads"),
    "workload_images": lambda: PARAMETER_TABLES["workload_images"].empty_table(),  # text-only workloads
    "dtypes": lambda: _load_default("dtypes"),
    "gpus": _load_gpus,
    "deployments": lambda: _load_default("deployments"),
    "deployment_mesh": lambda: _load_default("deployment_mesh"),
    "frameworks": lambda: _load_default("frameworks"),
    "deployment_frameworks": lambda: _load_default("deployment_frameworks"),
    "deployment_flags": lambda: PARAMETER_TABLES["deployment_flags"].empty_table(),  # every flag at its default
    "storage_dtypes": lambda: _quant().storage_dtypes_table(),
    "checkpoint_prefixes": lambda: _quant().checkpoint_prefixes_table(),
    "serving_cases": lambda: PARAMETER_TABLES["serving_cases"].empty_table(),  # none until asked
}
_REFERENCE = {
    "parallel_groups": parallel_groups_table,
    "op_kernels": lambda: _primitives().op_kernels_table(),
    "op_math": lambda: _primitives().op_math_table(),
    "fusion_rules": _fusion_rules,
    "gpu_architectures": _gpu_architectures,
    "serving_frameworks": lambda: _serving("serving_frameworks"),
    "serving_gpu_generations": lambda: _serving("serving_gpu_generations"),
    "serving_constants": lambda: _serving("serving_constants"),
}


def _primitives():
    from archsql.evaluator.primitives import base

    return base


def _quant():
    from archsql.schema import quant

    return quant


_BUILD_HINT = "run `archsql build` to create the store"
_REPAIR_HINT = (
    "run `archsql build` to repair it (every model it holds is evaluated again; parameter tables and "
    "checkpoints are kept)"
)


def write_store(
    db_path: str | Path,
    tables: Mapping[str, pa.Table],
    *,
    replace_models: bool = True,
    refresh_derived: bool = True,
    views: Iterable[str] | None = None,
    _from_empty: bool = True,
) -> list[str]:
    """Write evaluated tables (all models concatenated) into the DuckDB file at ``db_path``.

    Rows of the models present in ``tables`` replace that model's rows already in the
    store; other models are kept.  With ``replace_models=False`` a model that is already in
    the store is an error instead.  Parameter tables given in ``tables`` replace the stored
    ones; absent ones are created with defaults once and then left to the user.

    A store written by another archsql is brought to this one's layout first
    (:mod:`archsql.store_layout`): rebuilt tables are written again, the user's tables are
    saved as CSV and their rows copied into the new layout.  Returns a note per table so
    migrated, for the user.  ``refresh_derived=False`` leaves the derived tables stale (reads
    go live, never stale): for a store that is read once, through a few views, and dropped.
    ``views``: the views whose rows a full refresh computes, with those they read (None: all;
    :func:`refresh`): for a store read only through them (the design store).
    """
    unknown = sorted(set(tables) - set(TABLES) - set(PARAMETER_TABLES))
    if unknown:
        known = [*TABLES, *PARAMETER_TABLES]
        raise StoreError(issues=[Issue(f"unknown table '{name}'", hint=did_you_mean(name, known)) for name in unknown])
    evaluated = {name: _conform(name, schema, tables.get(name)) for name, schema in TABLES.items()}
    params = {n: _conform(n, s, tables[n]) for n, s in PARAMETER_TABLES.items() if n in tables}
    for name, table in params.items():
        _check_keys(name, table, PARAMETER_KEYS[name])
    _check_keys("models", evaluated["models"], ("model",))  # a model evaluated twice would count twice
    models = sorted({m for t in evaluated.values() for m in t.column("model").unique().to_pylist() if m})

    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a new store, with models or none (a kernel corpus's store): a copy of the empty store
    copied = _from_empty and not path.exists() and _copy_empty_store(path)
    con = _open(path, read_only=False)
    con.begin()
    try:
        if copied:  # the empty store's own build record is not this store's history
            con.execute("delete from store_meta")
        existing = _table_names(con)
        notes = _bring_layouts_up_to_date(con, existing, models, path)  # reference tables: rewritten
        # every table there before this write, none rewritten in another layout: the views bound
        # to them stand, and need creating again only if their SQL is not the files' now
        views_stand = existing >= _ALL_TABLES and sources_current(con)
        if not replace_models and "models" in existing:
            _refuse_present_models(con, models)
        # parameter tables given whole: when one holds other rows than before, its digest moves and
        # refresh_changed computes every derived row again; when it holds the same rows (a design
        # command writing the contexts it wrote last time), only the models' rows are
        before = snapshot(con)
        for name, table in evaluated.items():
            _write_evaluated(con, name, table, models, exists=name in existing)
        for name in PARAMETER_TABLES:
            if name in params:
                _replace_table(con, name, params[name], exists=name in existing, key=PARAMETER_KEYS[name])
            elif name not in existing:
                default = _DEFAULTS[name]()
                _check_keys(name, default, PARAMETER_KEYS[name])
                _replace_table(con, name, default, exists=False, key=PARAMETER_KEYS[name])
        for name, rows in _REFERENCE.items():  # from code: rewritten on every build (another layout: dropped above)
            _replace_table(con, name, rows(), exists=name in existing, key=REFERENCE_KEYS[name])
        for name, schema in CHECKPOINT_TABLES.items():  # filled by write_checkpoint
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        _record_meta(con, models)
        if not views_stand:
            create_views(con)
        # the models' rows written (and the build record): their derived rows computed again,
        # unless a view, a reference table or anything else changed too (then all of them)
        if refresh_derived:
            refresh_changed(con, before, Change.of([*TABLES, "store_meta"], model=models), views=views)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()  # after commit or rollback
    return notes


_ALL_TABLES = {*TABLES, *PARAMETER_TABLES, *_REFERENCE, *CHECKPOINT_TABLES}


def _copy_empty_store(path: Path) -> bool:
    """Start a new store at ``path`` as a copy of the empty store (every table with its
    default rows, no model; the macros and views created, the derived tables recorded):
    creating ~100 views binds each one's chain of views, seconds that every new store would
    otherwise pay.  The empty store is written once per content of what it holds (the archsql
    version, the default parameter rows, the view and macro SQL) into the cache folder
    (``$ARCHSQL_CACHE_DIR``, else ``$XDG_CACHE_HOME/archsql``, else ``~/.cache/archsql``); when
    that folder cannot be written, the store is created in place as before.  The copy is
    checked like any existing store by the write that follows (layouts, view sources).
    Returns whether the store was copied."""
    import shutil
    import tempfile

    folder = _cache_folder()
    try:
        key = _empty_store_key()
        template = folder / f"empty-store-{key}.duckdb"
        if not template.exists():
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder) as scratch:
                built = Path(scratch) / "empty.duckdb"
                write_store(built, {}, _from_empty=False)  # no model: creates it in place
                if Path(f"{built}.wal").exists():  # not all in the file: not a store to copy
                    raise OSError(f"{built}: DuckDB left a write-ahead log")
                os.replace(built, template)  # atomic: a concurrent writer's copy is the same store
        shutil.copyfile(template, path)
    except OSError:
        path.unlink(missing_ok=True)  # the write creates the store in place
        return False
    return True


def _cache_folder() -> Path:
    if os.environ.get("ARCHSQL_CACHE_DIR"):
        return Path(os.environ["ARCHSQL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "archsql"


def _empty_store_key() -> str:
    """A digest of what an empty store holds that a later write keeps as it finds it: the
    default parameter rows (written once, then the user's), the view and macro SQL, the table
    layouts and the archsql and DuckDB versions (reference tables are rewritten by every write)."""
    import pyarrow.ipc as ipc

    digest = hashlib.md5(f"{__version__}|{duckdb.__version__}|{_DERIVED_FORMAT}|{contract_digest()}".encode())
    for name in sorted(_DEFAULTS):
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, PARAMETER_TABLES[name]) as writer:
            writer.write_table(_conform(name, PARAMETER_TABLES[name], _DEFAULTS[name]()))
        digest.update(name.encode() + sink.getvalue().to_pybytes())
    for f in [*macro_files(), *view_files()]:
        digest.update(f"{f.name}:{f.sql}".encode())
    return digest.hexdigest()[:20]


def repair_plan(db_path: str | Path, building: Iterable[str], catalog: Iterable[str]) -> list[str]:
    """The models (catalog names or spec paths) a build of ``building`` into ``db_path`` must
    also evaluate to repair the store (:func:`archsql.store_layout.models_to_repair`)."""
    path = Path(db_path)
    if not path.is_file():
        return []
    con = _open(path, read_only=True)
    try:
        return models_to_repair(con, path, building, catalog)
    finally:
        con.close()


def write_checkpoint(
    db_path: str | Path, table: pa.Table, *, model: str, profile: str = "native", refresh_derived: bool = True
) -> str:
    """Load one checkpoint's ``checkpoint_tensors`` (``archsql.ingest.read_checkpoint``) into the
    store and map it to the model (and storage profile) it is reconciled against; rows of the
    same checkpoint id are replaced.  Returns the checkpoint id.  ``refresh_derived=False``
    leaves the derived tables stale (reads go live, never stale) for a batch of writes that
    :func:`refresh_store` follows once (or write the batch with :func:`write_checkpoints`)."""
    (checkpoint,) = write_checkpoints(db_path, [(table, model, profile)], refresh_derived=refresh_derived)
    return checkpoint


def write_checkpoints(
    db_path: str | Path, checkpoints: Iterable[tuple[pa.Table, str, str]], *, refresh_derived: bool = True
) -> list[str]:
    """Load several checkpoints, each ``(checkpoint_tensors, model, profile)`` as
    :func:`write_checkpoint` takes them, in one transaction: all of them or none, and the
    derived rows of the models they map to (and mapped to before) computed once, after the
    last.  Returns the checkpoint ids in order."""
    con = connect(db_path, read_only=False, derived=False)  # refreshed once, after the writes
    before = snapshot(con)
    con.begin()
    try:
        known = {r[0] for r in con.execute("select model from models").fetchall()}
        existing = _table_names(con)
        for name, schema in CHECKPOINT_TABLES.items():
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        ids: list[str] = []
        touched: list[str] = []
        for table, model, profile in checkpoints:
            checkpoint, mapped = _write_one_checkpoint(con, db_path, known, table, model, profile)
            ids.append(checkpoint)
            touched += [model, *mapped]
        if refresh_derived:  # the rows of the models they map to now, and of those they mapped to before
            refresh_changed(con, before, Change.of(CHECKPOINT_TABLES, model=touched))
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()
    return ids


def _write_one_checkpoint(
    con: duckdb.DuckDBPyConnection, db_path: str | Path, known: set[str], table: pa.Table, model: str, profile: str
) -> tuple[str, list[str]]:
    """Write one checkpoint's rows in the caller's transaction; (its id, the models it was
    mapped to before)."""
    table = _conform("checkpoint_tensors", CHECKPOINT_TABLES["checkpoint_tensors"], table)
    ids = table.column("checkpoint").unique().to_pylist()
    if len(ids) != 1:
        raise StoreError(f"write_checkpoint takes the tensors of one checkpoint, got {len(ids)} checkpoint ids")
    checkpoint = ids[0]
    if model not in known:
        raise StoreError(
            f"model '{model}' is not in the store {db_path}",
            [Issue("build it first: archsql build MODEL", hint=did_you_mean(model, known))],
        )
    rows = con.execute("select distinct profile from storage_tensors where model = ?", [model]).fetchall()
    profiles = {r[0] for r in rows}
    if profiles and profile not in profiles:
        raise StoreError(
            f"model '{model}' has no storage profile '{profile}' in the store",
            [Issue(f"stored profiles: {', '.join(sorted(profiles))}", hint=did_you_mean(profile, profiles))],
        )
    mapped = [r[0] for r in con.execute("select model from checkpoints where checkpoint = ?", [checkpoint]).fetchall()]
    con.execute("delete from checkpoint_tensors where checkpoint = ?", [checkpoint])
    con.execute("delete from checkpoints where checkpoint = ?", [checkpoint])
    _insert_arrow(con, "checkpoint_tensors", table, create=False)
    mapping = pa.Table.from_pylist(
        [{"checkpoint": checkpoint, "model": model, "profile": profile}], schema=CHECKPOINT_TABLES["checkpoints"]
    )
    _insert_arrow(con, "checkpoints", mapping, create=False)
    return checkpoint, mapped


def insert_deployments(
    con: duckdb.DuckDBPyConnection, rows: list[Mapping[str, object]], *, like: str | None = None
) -> None:
    """Insert deployments written one mapping each — the ``deployments`` columns and the
    degree of each mesh axis by name (``tp=8, ep=8``; an axis not given has its default) —
    into ``deployments`` and ``deployment_mesh``, by column name.  With ``like``, every
    field not given is the named deployment's (its mesh and framework included).  ``framework``
    names the serving framework (``deployment_frameworks``) whose default memory fraction
    applies when ``usable_memory_fraction`` is not given.  Like every parameter write, it
    leaves the store's derived tables stale (:func:`refresh`) and ``con`` reading the live views."""
    columns = PARAMETER_TABLES["deployments"].names
    base = deployment_fields(con, like) if like is not None else {}
    scalars, meshes, frameworks = [], [], []
    for row in rows:
        merged = {**base, **row}
        framework = merged.pop("framework", None)
        try:
            scalar, mesh = split_deployment(merged, columns)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        scalars.append(scalar)
        meshes.extend(mesh)
        if framework is not None:
            frameworks.append({"deployment": scalar["deployment"], "framework": framework})
    insert_rows(con, "deployments", scalars)
    insert_rows(con, "deployment_mesh", meshes)
    if frameworks:
        insert_rows(con, "deployment_frameworks", frameworks)


def deployment_fields(con: duckdb.DuckDBPyConnection, deployment: str) -> dict[str, object]:
    """Every field of a stored deployment, as :func:`insert_deployments` takes them: its
    ``deployments`` columns, the degree of each mesh axis by name and its ``framework``."""
    found = con.sql("select * from deployments where deployment = ?", params=[deployment]).to_arrow_table().to_pylist()
    if not found:
        raise StoreError(f"no deployment '{deployment}' to copy")
    fields = found[0]
    fields.update(con.execute("select axis, degree from deployment_mesh where deployment = ?", [deployment]).fetchall())
    framework = con.execute("select framework from deployment_frameworks where deployment = ?", [deployment]).fetchall()
    if framework:
        fields["framework"] = framework[0][0]
    return fields


def keep_deployments(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove every deployment not in ``names`` (its mesh, framework and flag rows with it): a store
    whose views answer only the deployments a question is about (its derived tables stale
    until :func:`refresh`; ``con`` reads the live views)."""
    unshadow(con)
    keep = sorted(set(names))
    for table in ("deployment_mesh", "deployment_frameworks", "deployment_flags", "deployments"):
        con.execute(f"delete from {table} where deployment not in (select unnest(?::varchar[]))", [keep])


def remove_deployments(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove the named deployments with their mesh, framework and launch-flag rows (the
    complement of :func:`keep_deployments`; derived tables stale until :func:`refresh`)."""
    unshadow(con)
    drop = sorted(set(names))
    for table in ("deployment_mesh", "deployment_frameworks", "deployment_flags", "deployments"):
        con.execute(f"delete from {table} where deployment in (select unnest(?::varchar[]))", [drop])


def remove_workloads(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove the named workloads with their image rows (derived tables stale until
    :func:`refresh`)."""
    unshadow(con)
    drop = sorted(set(names))
    for table in ("workload_images", "workloads"):
        con.execute(f"delete from {table} where workload in (select unnest(?::varchar[]))", [drop])


def insert_rows(con: duckdb.DuckDBPyConnection, name: str, rows: list[Mapping[str, object]]) -> None:
    """Insert rows (one mapping each, by column name; a column not given is null) into the
    parameter table ``name``.  A key given twice, or already in the table, is a
    :class:`StoreError` naming the table, its key and the values; nothing is inserted.  The
    store's derived tables are stale until :func:`refresh` (``con`` reads the live views)."""
    unshadow(con)
    table = pa.Table.from_pylist(list(rows), schema=PARAMETER_TABLES[name])
    key = PARAMETER_KEYS[name]
    _check_keys(name, table, key)
    try:
        _insert_arrow(con, name, table, create=False)
    except duckdb.ConstraintException:
        taken = _keys_present(con, name, table, key)
        issues = [Issue(f"key ({', '.join(key)}) = ({v}) is already in the table", path=name) for v in taken]
        raise StoreError(
            f"table '{name}' already has a row of that key ({', '.join(key)})",
            issues or [Issue("a key column is null or repeated", path=name)],
        ) from None


def write_record(
    con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, key: tuple[str, ...], record: Mapping[str, object]
) -> None:
    """Write the rows of one record (an edit, a saved sweep) into the record table ``name``:
    created with primary key ``key`` when absent; the rows whose columns equal ``record``'s
    values are replaced (the record written again), other records kept.  Neither an evaluated
    nor a parameter table: no derived row reads it (the caller commits)."""
    _check_keys(name, table, key)
    if name in _table_names(con):
        where = " and ".join(f'"{c}" = ?' for c in record) or "true"  # no record columns: the table holds one
        con.execute(f'delete from "{name}" where {where}', list(record.values()))
        _insert_arrow(con, name, table, create=False)
    else:
        _insert_arrow(con, name, table, create=True, key=key)


def connect(db_path: str | Path, read_only: bool = True, *, derived: bool = True) -> duckdb.DuckDBPyConnection:
    """Open an existing store; a missing or empty file is a :class:`StoreError`.

    With ``derived`` (the default), on a read-only connection the views read the store's
    derived tables when they are fresh (:func:`freshness`); when stale they read live (and
    the registered notices are told: :func:`register_stale_notice`).  A writable connection
    always reads the live views: its own writes would not reach a shadow, and a refresh
    before them would be undone by them (:func:`refresh` when done)."""
    path = Path(db_path)
    if not path.is_file():
        raise StoreError(f"no archsql store at {path}; {_BUILD_HINT}")
    con = _open(path, read_only=read_only)
    expected = (*TABLES, *PARAMETER_TABLES, *REFERENCE_TABLES)
    present = _table_names(con)
    missing = [name for name in expected if name not in present]
    if missing:
        con.close()
        what = (
            "has no archsql tables"
            if len(missing) == len(expected)
            else f"is incomplete (missing tables: {', '.join(missing)})"
        )
        hint = _BUILD_HINT if len(missing) == len(expected) else _REPAIR_HINT
        raise StoreError(f"{path} {what}; {hint}")
    try:
        if derived and read_only:  # a writable connection could change what a shadow holds
            use_derived(con, path)
        else:
            check_layout(con, path)
    except BaseException:
        con.close()
        raise
    return con


# -- derived tables ------------------------------------------------------------------------

DERIVED = DERIVED_SCHEMA
_FRESHNESS = "freshness"
# per view: the views it reads, the store tables it reads (through them too) and the md5 of
# the SQL it was created from, recorded by a full refresh: what a write reaches and the order a
# sweep computes views in, without parsing the views again (sqlglot) while their SQL is the same
_GRAPH = "view_graph"
# the view layers whose rows are computed into derived tables: base views only rename and
# type the store's tables (reading them costs what reading the table does)
DERIVED_LAYERS = ("int", "reports")
# and the base view every answer reads through: the parameter rows the views leave out, which
# the CLI reports after each query (computed once rather than on every call)
DERIVED_BASE_VIEWS = ("parameter_checks",)
# bumped when the way derived rows are computed or fingerprinted changes
_DERIVED_FORMAT = 1
# tables whose whole content is fingerprinted (small: what a person edits, what code writes);
# the evaluated tables are written only by `write_store`, which records a store_meta row per
# write: their row counts and that record stand for them
_HASHED_TABLES = (*PARAMETER_TABLES, *REFERENCE_TABLES, "checkpoints", "store_meta")
_COUNTED_TABLES = (*TABLES, "checkpoint_tensors")


@dataclass(frozen=True)
class Freshness:
    """Whether the store's derived tables hold the rows its views give now."""

    fresh: bool
    recorded: str | None  # the fingerprint recorded when they were computed (None: never)
    current: str | None  # the fingerprint of the store now (None when there is none recorded)
    materialized: tuple[str, ...]  # the views computed into derived tables


_STALE_NOTICES: list[Callable[[Path, Freshness], None]] = []


def register_stale_notice(notice: Callable[[Path, Freshness], None]) -> None:
    """Call ``notice(store path, freshness)`` when a read-only :func:`connect` finds the
    derived tables stale and reads the live views (the CLI says so on stderr)."""
    if notice not in _STALE_NOTICES:
        _STALE_NOTICES.append(notice)


def fingerprint(con: duckdb.DuckDBPyConnection, views: Iterable[str], macros: Iterable[str]) -> str:
    """A digest of every input of the derived rows: the content of the parameter, reference
    and checkpoint-mapping tables and the build record (``store_meta``), the row counts of
    the evaluated tables, the SQL ``views`` and ``macros`` were created from (their md5 in
    ``derived.sources``, written by :func:`archsql.views.create_views`), and the archsql,
    DuckDB and derived-format versions.  One query over the store's own tables (never a connection's
    temporary shadows)."""
    return _combine(_digests(con, views, macros))


def _digests(con: duckdb.DuckDBPyConnection, views: Iterable[str], macros: Iterable[str]) -> dict[str, str]:
    """The fingerprint's parts: a digest per input table (and ``sources`` for the SQL)."""
    db = _quote(_current_database(con))
    parts = [
        f"select '{t}' as name, count(*)::varchar || ':' || coalesce(sum(hash(x)), 0)::varchar as digest "
        f'from {db}.main."{t}" as x'
        for t in _HASHED_TABLES
    ]
    parts += [f"select '{t}', count(*)::varchar from {db}.main.{_quote(t)}" for t in _COUNTED_TABLES]
    parts.append(
        "select 'sources', coalesce(md5(string_agg(kind || ':' || name || ':' || sql_md5, ';' order by kind, name)), '') "
        f"from {db}.{DERIVED}.{SOURCES_TABLE} "
        "where (kind = 'view' and name in (select unnest($views::varchar[]))) "
        "or (kind = 'macro' and name in (select unnest($macros::varchar[])))"
    )
    rows = con.execute(" union all ".join(parts), {"views": sorted(views), "macros": sorted(macros)}).fetchall()
    return dict(rows)


def _combine(digests: Mapping[str, str]) -> str:
    versions = f"|archsql {__version__}|duckdb {duckdb.__version__}|{_DERIVED_FORMAT}|{contract_digest()}"
    text = "|".join(f"{name}={digests[name]}" for name in sorted(digests)) + versions
    return hashlib.md5(text.encode()).hexdigest()


def freshness(con: duckdb.DuckDBPyConnection) -> Freshness:
    """The state of the store's derived tables against the store as it is now."""
    recorded = _recorded(con)
    if recorded is None:
        return Freshness(False, None, None, ())
    digest, views, macros, materialized = recorded
    try:
        current = fingerprint(con, views, macros)
    except duckdb.CatalogException:  # a table it reads was dropped
        return Freshness(False, digest, None, tuple(materialized))
    return Freshness(current == digest, digest, current, tuple(materialized))


def refresh(con: duckdb.DuckDBPyConnection, views: Iterable[str] | None = None) -> list[str]:
    """Compute the rows of every ``int`` and ``reports`` view into ``derived.<view>`` and
    record their fingerprint, on a writable connection (in the caller's transaction, if
    any); the connection then reads them.  Each view is computed once, from the computed
    rows of the views it reads (each shadows its view while the next are computed).  Returns
    the names of the materialized views, in dependency order.

    ``views``: only these views and those they read are materialized (the others are read
    live, from the materialized ones: a store read through a few views, the design store)."""
    unshadow(con)
    con.execute("set enable_progress_bar = false")  # DuckDB's bar on long statements: not on our output
    # the graph the last refresh recorded while every view's SQL is the same (else parsed from
    # the view files): parsing ~100 view files with sqlglot is ~0.7 s of CPU per process
    graph = view_graph_of(con)
    by_name = {f.name: f for f in view_files()}
    files = [by_name[name] for name in graph.order]
    macros = [m.name for m in macro_files()]
    db = _quote(_current_database(con))
    con.execute(f"create schema if not exists {db}.{DERIVED}")
    con.execute(
        f"create table if not exists {db}.{DERIVED}.{SOURCES_TABLE} (kind varchar, name varchar, sql_md5 varchar)"
    )
    old = con.execute(
        "select table_name from duckdb_tables() where database_name = current_database() and schema_name = ? "
        "and table_name <> ?",
        [DERIVED, SOURCES_TABLE],
    ).fetchall()
    for (name,) in old:
        con.execute(f"drop table {db}.{DERIVED}.{_quote(name)}")
    transient = _transient(graph, by_name)
    wanted = None if views is None else {*graph.closure(views), *DERIVED_BASE_VIEWS}
    done: list[str] = []
    for f in files:
        if f.layer not in DERIVED_LAYERS and f.name not in DERIVED_BASE_VIEWS:
            continue
        if wanted is not None and f.name not in wanted:
            continue
        if f.name in transient:  # computed once for the one report that reads it, not stored
            con.execute(f'create temp table "{f.name}" as select * from {db}.main."{f.name}"')
            continue
        con.execute(f'create table {db}.{DERIVED}."{f.name}" as select * from {db}.main."{f.name}"')
        con.execute(f'create temp view "{f.name}" as select * from {db}.{DERIVED}."{f.name}"')
        done.append(f.name)
    for name in transient:  # read live again (from the stored views it reads)
        con.execute(f'drop table if exists temp.main."{name}"')
    _record_graph(con, graph)
    _record_freshness(con, [f.name for f in files], macros, done)
    return done


def _record_freshness(con: duckdb.DuckDBPyConnection, views: list[str], macros: list[str], done: list[str]) -> None:
    """Record what the derived tables were computed from (the fingerprint now) and which they are."""
    db = _quote(_current_database(con))
    con.execute(f"drop table if exists {db}.{DERIVED}.{_FRESHNESS}")
    con.execute(
        f"create table {db}.{DERIVED}.{_FRESHNESS} as select ? as fingerprint, ?::varchar[] as views, "
        "?::varchar[] as macros, ?::varchar[] as materialized, ? as archsql_version, "
        "now()::timestamp as computed_at_utc",
        [fingerprint(con, views, macros), views, macros, done, __version__],
    )


def _stored_for(graph: ViewGraph, views: Iterable[str]) -> set[str]:
    """The views :func:`refresh` stores when asked for ``views``: those and the views they read
    that are materialized at all (int and reports views, :data:`DERIVED_BASE_VIEWS`; not the
    transient ones)."""
    by_name = {f.name: f for f in view_files()}
    transient = _transient(graph, by_name)
    return {
        name
        for name in (*graph.closure(views), *DERIVED_BASE_VIEWS)
        if name in by_name
        and (by_name[name].layer in DERIVED_LAYERS or name in DERIVED_BASE_VIEWS)
        and name not in transient
    }


def _transient(graph: ViewGraph, files: Mapping[str, ViewFile]) -> set[str]:
    """The int views read by exactly one view, a report, whose sidecar says ``stored: false``
    (:func:`archsql.views.unstored_views`): that report's private step, too large to keep
    (the per-device shapes, 4.5 M rows on the catalog; the spec and file tensors), computed
    once while its report is and not stored; a query of it reads live from the stored
    views it reads.  A private step of few rows is stored like any view: computing
    ``int_device_activations`` again takes ~10 s of CPU on the catalog for 10,660 rows."""
    unstored = unstored_views()
    readers: dict[str, set[str]] = {name: set() for name in graph.order}
    for name, reads in graph.reads.items():
        for read in reads:
            readers[read].add(name)
    return {
        name
        for name in graph.order
        if name in unstored
        and files[name].layer == "int"
        and len(readers[name]) == 1
        and files[next(iter(readers[name]))].layer == "reports"
    }


# -- incremental refresh -------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """What a write changed: the store ``tables`` it wrote, and the key values whose rows it
    wrote, by key column (``keys``: (column, values) pairs, the first a view has decides how
    its rows are recomputed).  Archsql's writers declare their change (a deployment written:
    ``Change(DEPLOYMENT_TABLES, (("deployment", (name,)),))``)."""

    tables: frozenset[str]
    keys: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def of(cls, tables: Iterable[str], **keys: Iterable[str]) -> Change:
        return cls(frozenset(tables), tuple((column, tuple(sorted(set(v)))) for column, v in keys.items()))


# the parameter tables each kind of parameter write changes
DEPLOYMENT_TABLES = ("deployments", "deployment_mesh", "deployment_frameworks", "deployment_flags")
WORKLOAD_TABLES = ("workloads", "workload_images")


@dataclass(frozen=True)
class Snapshot:
    """The store's inputs before a write (:func:`snapshot`): the fingerprint's parts, and
    whether the derived tables held the views' rows then."""

    fresh: bool
    digests: Mapping[str, str]


def snapshot(con: duckdb.DuckDBPyConnection) -> Snapshot:
    """Take before a write, then pass to :func:`refresh_changed` after it."""
    recorded = _recorded(con)
    if recorded is None:
        return Snapshot(False, {})
    digest, views, macros, _ = recorded
    if not _fingerprinted_present(con):  # (a failed query would abort the caller's transaction)
        return Snapshot(False, {})
    digests = _digests(con, views, macros)
    return Snapshot(_combine(digests) == digest, digests)


def _fingerprinted_present(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether every table the fingerprint reads is in the store (a damaged or older store
    may lack one: then nothing derived is current)."""
    return {*_HASHED_TABLES, *_COUNTED_TABLES} <= _table_names(con)


def refresh_changed(
    con: duckdb.DuckDBPyConnection, before: Snapshot, change: Change, *, views: Iterable[str] | None = None
) -> list[str]:
    """Bring the derived tables up to date after a write that changed only ``change``: the
    derived rows of the changed keys are deleted and computed again, by each view's own SQL
    over the store's rows of those keys (every other derived row is kept: it does not read
    them).  Falls back to :func:`refresh` (everything computed again) unless the derived
    tables were current ``before`` the write and nothing but ``change.tables`` moved since
    (a view's SQL, a reference table, a table written another way).  Returns the views whose
    rows were computed; records the new fingerprint either way.

    A view's rows are recomputed by the first key column of ``change.keys`` it has (its rows
    of those values: tables and derived rows of that column filtered to them, everything
    else read whole), or, when it has none, all of them; a view that reads none of
    ``change.tables`` is kept.  That a row of a key reads only the rows of that key (the
    deployment ``x`` rows of ``step_sol`` read no other deployment) is what the views are
    built on; tests/test_derived.py compares every derived table with its live view after
    each kind of write.  ``views``: as :func:`refresh`'s, when everything is computed again
    (the stored views are kept current either way)."""
    wanted = None if views is None else list(views)

    def everything() -> list[str]:
        return refresh(con) if wanted is None else refresh(con, wanted)

    recorded = _recorded(con)
    if not before.fresh or recorded is None:
        return everything()
    _, views, macros, materialized = recorded
    after = _digests(con, views, macros)
    moved = {name for name in after.keys() | before.digests.keys() if after.get(name) != before.digests.get(name)}
    graph = recorded_graph(con)
    if not moved <= change.tables or graph is None or graph.order != views:
        return everything()  # not only the change moved, or views came, went or changed: all of them
    if wanted is not None and not _stored_for(graph, wanted) <= set(materialized):
        return everything()  # a view wanted is not stored yet
    reads = graph.tables
    unshadow(con)
    db = _quote(_current_database(con))
    columns: dict[str, set[str]] = {}
    for table, column in con.execute(
        "select table_name, column_name from duckdb_columns() where database_name = current_database() "
        "and schema_name in ('main', ?)",
        [DERIVED],
    ).fetchall():
        columns.setdefault(table, set()).add(column)
    stored = set(materialized)
    state: list[tuple[str, tuple[str, ...]] | None] = [("", ())]  # the connection's filter now
    done: list[str] = []
    for name in views:  # in dependency order
        if name not in stored or not reads[name] & change.tables:
            continue
        key = next(((c, v) for c, v in change.keys if c in columns[name]), None)
        if key is not None:
            (nulls,) = con.execute(
                f"select count(*) from {db}.{DERIVED}.{_quote(name)} where {_quote(key[0])} is null"
            ).fetchone()
            if nulls:  # rows of no key value: which change reaches them is unknown, so all of them
                key = None
        if key is not None and not key[1]:
            continue  # no rows of this key were written
        if state[0] != key:
            _filter_to(con, key, stored, columns)
            state[0] = key
        where = "" if key is None else f" where {_quote(key[0])} in (select unnest(?::varchar[]))"
        params = [] if key is None else [list(key[1])]
        con.execute(f"delete from {db}.{DERIVED}.{_quote(name)}{where}", params)
        con.execute(f"insert into {db}.{DERIVED}.{_quote(name)} select * from {db}.main.{_quote(name)}{where}", params)
        done.append(name)
    _filter_to(con, None, set(), columns)  # the store's tables again
    shadow(con, materialized)
    _record_freshness(con, views, macros, list(materialized))
    return done


@dataclass(frozen=True)
class ViewGraph:
    """The store's views in dependency order, the views each reads directly and the store
    tables each reads (directly or through the views it reads)."""

    order: list[str]
    reads: dict[str, set[str]]
    tables: dict[str, set[str]]

    def closure(self, needed: Iterable[str]) -> list[str]:
        """``needed`` (names that are not views are ignored) and every view they read, in
        dependency order."""
        wanted: set[str] = set()
        stack = [n.lower() for n in needed if n.lower() in self.reads]
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack.extend(self.reads[name])
        return [name for name in self.order if name in wanted]


def view_graph_of(con: duckdb.DuckDBPyConnection) -> ViewGraph:
    """The graph of the store's views: as the last full refresh recorded it while every view's
    SQL is the one it was recorded from, else parsed from the view files (sqlglot)."""
    graph = recorded_graph(con)
    if graph is not None:
        return graph
    _, deps = view_graph(con)
    return ViewGraph([f.name for f in ordered_views(con)], deps, view_reads(con))


def recorded_graph(con: duckdb.DuckDBPyConnection) -> ViewGraph | None:
    """The view graph the last full refresh recorded, or None when a view of the store came,
    went or was created from other SQL since (``derived.sources``) or none was recorded."""
    db = _quote(_current_database(con))
    (recorded,) = con.execute(
        "select count(*) from duckdb_tables() where database_name = current_database() and schema_name = ? "
        "and table_name in (?, ?)",
        [DERIVED, _GRAPH, SOURCES_TABLE],
    ).fetchone()
    if recorded < 2:  # none recorded (a new or an older store); never a name DuckDB looks up elsewhere
        return None
    try:
        rows = con.execute(
            f"select g.view, g.reads, g.tables, g.sql_md5 is not distinct from s.sql_md5 "
            f"from {db}.{DERIVED}.{_GRAPH} as g "
            f"left join {db}.{DERIVED}.{SOURCES_TABLE} as s on s.kind = 'view' and s.name = g.view "
            "order by g.position"
        ).fetchall()
    except duckdb.CatalogException:  # none recorded (an older store)
        return None
    present = {f.name for f in view_files()} & set(_view_names(con))
    if not all(same for *_, same in rows) or {r[0] for r in rows} != present:
        return None
    return ViewGraph([r[0] for r in rows], {r[0]: set(r[1]) for r in rows}, {r[0]: set(r[2]) for r in rows})


def _record_graph(con: duckdb.DuckDBPyConnection, graph: ViewGraph) -> None:
    db = _quote(_current_database(con))
    deps, tables, names = graph.reads, graph.tables, graph.order
    con.execute(f"drop table if exists {db}.{DERIVED}.{_GRAPH}")
    con.execute(
        f"create table {db}.{DERIVED}.{_GRAPH} as "
        "select g.view, g.position, g.reads, g.tables, s.sql_md5 from (select unnest($names::varchar[]) as view, "
        "unnest(range(len($names))) as position, unnest($reads::varchar[][]) as reads, "
        "unnest($tables::varchar[][]) as tables) as g "
        f"left join {db}.{DERIVED}.{SOURCES_TABLE} as s on s.kind = 'view' and s.name = g.view",
        {"names": names, "reads": [sorted(deps[n]) for n in names], "tables": [sorted(tables[n]) for n in names]},
    )


def reuse_derived(
    con: duckdb.DuckDBPyConnection, graph: ViewGraph, views: Iterable[str], changed: Iterable[str], *, model: str
) -> list[str]:
    """Make each stored view of ``views`` that reads none of the ``changed`` tables read as
    its derived rows of ``model`` on ``con`` (a TEMP VIEW): what a sweep's grid cannot change
    is not computed again.  Only while the derived tables hold the store's rows: take
    :func:`snapshot` before writing the grid and call this only when it was fresh.  Returns
    the views so shadowed."""
    recorded = _recorded(con)
    if recorded is None:
        return []
    stored = set(recorded[3])
    changed = set(changed)
    db = _quote(_current_database(con))
    with_model = {
        r[0]
        for r in con.execute(
            "select table_name from duckdb_columns() where database_name = current_database() and schema_name = ? "
            "and column_name = 'model'",
            [DERIVED],
        ).fetchall()
    }
    reused = [name for name in views if name in stored and not graph.tables.get(name, changed) & changed]
    script = [
        f"create or replace temp view {_quote(name)} as select * from {db}.{DERIVED}.{_quote(name)}"
        + (f" where model = {_literal(model)}" if name in with_model else "")
        for name in reused
    ]
    if script:
        con.execute(";\n".join(script))
    return reused


def _view_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The names of the store's views (schema main)."""
    rows = con.execute(
        "select view_name from duckdb_views() where database_name = current_database() and schema_name = 'main' "
        "and not internal"
    ).fetchall()
    return [r[0] for r in rows]


def _filter_to(
    con: duckdb.DuckDBPyConnection,
    key: tuple[str, tuple[str, ...]] | None,
    stored: set[str],
    columns: Mapping[str, set[str]],
) -> None:
    """Make the store's tables with the key column, and the derived rows of ``stored`` views,
    read as their rows of the key's values on ``con`` (temporary tables and views, which
    shadow them); the other derived tables whole.  ``key`` None: derived rows whole and the
    tables unfiltered (``stored`` empty: no shadows left)."""
    db = _quote(_current_database(con))
    column, values = key if key is not None else (None, ())
    for name in (*TABLES, *PARAMETER_TABLES, *REFERENCE_TABLES, *CHECKPOINT_TABLES):
        if column is not None and column in columns.get(name, ()):
            con.execute(
                f"create or replace temp table {_quote(name)} as select * from {db}.main.{_quote(name)} "
                f"where {_quote(column)} in (select unnest(?::varchar[]))",
                [list(values)],
            )
        else:
            con.execute(f"drop table if exists temp.main.{_quote(name)}")
    unshadow(con)
    script = []
    for name in sorted(stored):
        where = ""
        if column is not None and column in columns.get(name, ()):
            where = f" where {_quote(column)} in ({', '.join(_literal(v) for v in values)})"
        script.append(
            f"create or replace temp view {_quote(name)} as select * from {db}.{DERIVED}.{_quote(name)}{where}"
        )
    if script:
        con.execute(";\n".join(script))


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def shadow(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Make ``derived.<name>`` shadow the view ``<name>`` on ``con`` (a TEMP VIEW)."""
    db = _quote(_current_database(con))
    script = ";\n".join(f'create or replace temp view "{n}" as select * from {db}.{DERIVED}."{n}"' for n in names)
    if script:
        con.execute(script)


def unshadow(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the connection's shadows of the derived tables: its views read live again."""
    rows = con.execute(
        "select view_name from duckdb_views() where database_name = 'temp' and not internal "
        "and sql like '%' || ? || '%'",
        [f".{DERIVED}."],
    ).fetchall()
    for (name,) in rows:
        con.execute(f'drop view if exists temp.main."{name}"')


def refresh_store(db_path: str | Path) -> list[str]:
    """Compute the store's derived tables again (:func:`refresh`) in one transaction."""
    con = connect(db_path, read_only=False, derived=False)
    try:
        con.begin()
        try:
            names = refresh(con)
            con.commit()
        except BaseException:
            con.rollback()
            raise
    finally:
        con.close()
    return names


def scope(
    con: duckdb.DuckDBPyConnection,
    *,
    models: Iterable[str] | None = None,
    deployments: Iterable[str] | None = None,
    workloads: Iterable[str] | None = None,
) -> None:
    """Shadow the store's tables on ``con`` by temporary tables holding only the rows of
    these models, deployments and workloads (``None``: all of them): the live views on
    ``con`` then evaluate only those (a sweep's grid), from the same SQL.  The connection's
    derived shadows are dropped first; the scope lasts until the temporary tables are
    dropped (or rolled back with the transaction that made them)."""
    unshadow(con)
    db = _quote(_current_database(con))
    keys = {"model": models, "deployment": deployments, "workload": workloads}
    tables = {**TABLES, **PARAMETER_TABLES, **CHECKPOINT_TABLES}
    for name, schema in tables.items():
        for column, names in keys.items():
            if names is not None and column in schema.names:
                con.execute(
                    f"create or replace temp table {_quote(name)} as select * from {db}.main.{_quote(name)} "
                    f"where {_quote(column)} in (select unnest(?::varchar[]))",
                    [sorted(set(names))],
                )
                break


def scope_grid(
    con: duckdb.DuckDBPyConnection,
    model: str,
    deployments: list[Mapping[str, object]],
    workloads: list[Mapping[str, object]],
) -> None:
    """:func:`scope` for a grid that is not in the store, on any connection (a read-only one
    too; nothing is written to the store): the deployment and workload tables are shadowed by
    temporary tables holding only the grid's rows (written as :func:`insert_deployments` and
    :func:`insert_rows` write them, checks included), the other tables by their rows of
    ``model``.  The live views on ``con`` then evaluate the grid alone, from the same SQL.
    The scope lasts until the temporary tables are dropped (or the connection closed)."""
    unshadow(con)
    db = _quote(_current_database(con))
    for name in (*DEPLOYMENT_TABLES, *WORKLOAD_TABLES):
        con.execute(
            f"create or replace temp table {_quote(name)} as select * from {db}.main.{_quote(name)} where false"
        )
    insert_deployments(con, deployments)  # into the temporary tables, which the names resolve to first
    insert_rows(con, "workloads", workloads)
    scope(con, models=[model])


def use_derived(
    con: duckdb.DuckDBPyConnection, path: Path, reads: Iterable[str] | None = None, *, notify: bool = True
) -> Freshness:
    """The guard of :func:`connect` on a read-only connection opened with ``derived=False``:
    when the derived tables are fresh, shadow the views by them — only those a query reading
    ``reads`` reaches (:func:`archsql.views.relations_read`), when given; when stale, tell
    the registered notices (unless ``notify`` is false).  Returns the state found."""
    state = freshness(con)
    if state.fresh:  # fresh rows were computed from this layout
        reached = None if reads is None else _reached(con, reads, set(state.materialized))
        shadow(con, state.materialized if reached is None else reached)
        return state
    check_layout(con, path)
    if notify:
        notify_stale(path, state)
    return state


def notify_stale(path: Path, state: Freshness) -> None:
    """Tell the registered notices (:func:`register_stale_notice`) that ``path`` is read live."""
    if not state.fresh:
        for notice in _STALE_NOTICES:
            notice(path, state)


def check_layout(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A :class:`StoreError` when a table of the store has another layout than this archsql's
    (written by another version): it says to build, which migrates (:mod:`archsql.store_layout`)."""
    drifted = [d for d in drift(con) if not d.missing]
    if drifted:
        raise layout_error(path, drifted, recorded_version(con))


def _reached(con: duckdb.DuckDBPyConnection, reads: Iterable[str], materialized: set[str]) -> list[str] | None:
    """The stored views a query reading ``reads`` reaches: each stored view it reads, and the
    stored views under each view it reads that is not stored (read live).  None (shadow every
    one) when it reads a name that is neither a view of the recorded graph nor a store table
    (a view made outside archsql's view files, a CTE): what that reads is not known here.
    The graph is the one the derived tables were computed with: while they are fresh, the
    views' SQL is the SQL it was recorded from (the fingerprint covers it)."""
    db = _quote(_current_database(con))
    try:
        graph = dict(con.execute(f"select view, reads from {db}.{DERIVED}.{_GRAPH}").fetchall())
    except duckdb.CatalogException:
        return None
    tables = {*TABLES, *PARAMETER_TABLES, *REFERENCE_TABLES, *CHECKPOINT_TABLES, "store_meta"}
    reached: set[str] = set()
    seen: set[str] = set()
    stack = [name.lower() for name in reads]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in materialized:
            reached.add(name)
        elif name in graph:
            stack.extend(graph[name])
        elif name not in tables:
            return None
    return sorted(reached)


def _recorded(con: duckdb.DuckDBPyConnection) -> tuple[str, list[str], list[str], list[str]] | None:
    found = con.execute(
        "select 1 from duckdb_tables() where database_name = current_database() and schema_name = ? and table_name = ?",
        [DERIVED, _FRESHNESS],
    ).fetchall()
    if not found:
        return None
    db = _quote(_current_database(con))
    try:
        rows = con.execute(
            f"select fingerprint, views, macros, materialized from {db}.{DERIVED}.{_FRESHNESS}"
        ).fetchall()
    except duckdb.BinderException:  # recorded by another derived format
        return None
    return (rows[0][0], *(list(v) for v in rows[0][1:])) if len(rows) == 1 else None


def _current_database(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute("select current_database()").fetchall()[0][0]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- helpers -------------------------------------------------------------------------------


# How long opening a store waits while another process holds its write lock (a build or an
# import writes for a few seconds): long enough for a write window, short enough not to hang.
LOCK_WAIT_S = 30.0


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file; while another process holds its lock, wait and retry (up to
    ``$ARCHSQL_LOCK_WAIT_S``, default LOCK_WAIT_S seconds), then a :class:`StoreError`."""
    release(path)  # a read-only connection this process holds for queries (archsql.store_hold)
    try:
        wait = float(os.environ.get("ARCHSQL_LOCK_WAIT_S", LOCK_WAIT_S))
    except ValueError:
        wait = LOCK_WAIT_S
    deadline = time.monotonic() + max(wait, 0.0)
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise StoreError(f"cannot open the store {path}: {exc}") from None
            if time.monotonic() >= deadline:
                holder = re.search(r"\(PID (\d+)\)", str(exc))
                who = f"process {holder.group(1)}" if holder else "another process"
                raise StoreError(
                    f"the store {path} is locked: {who} is writing to it",
                    [
                        Issue(
                            f"waited {wait:g} s for the write to end",
                            hint="a build or corpus import holds the store while it writes; try again when it "
                            "has finished, or set ARCHSQL_LOCK_WAIT_S to wait longer",
                        )
                    ],
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from None
        else:
            try:
                tune_optimizer(con)
            except StoreError:
                con.close()
                raise
            return con


# DuckDB's projection pull-up pass (new in 2.0) re-optimises the subtree under each projection
# it removes: on the report views, which inline chains of ~50 views, it is most of the planning
# time and planning is most of a query's time (live device_memory on a one-model store: 4.1 s
# CPU, of which the pass 64 %; 1.9 s without it; same rows).  Disabling an optimizer pass
# changes the plan, never the result.
DISABLED_OPTIMIZERS = ("projection_pullup",)


THREADS_ENV = "ARCHSQL_THREADS"


def tune_optimizer(con: duckdb.DuckDBPyConnection) -> None:
    """Set the optimizer passes archsql's view chains are planned without on ``con``, and
    DuckDB's worker threads when ``$ARCHSQL_THREADS`` says how many (default: DuckDB's own,
    one per core).  On a machine shared by several processes (a CI runner, a test suite in
    parallel workers) one thread each spends less CPU on the same rows: DuckDB's threads
    would otherwise contend for the same cores."""
    con.execute(f"set disabled_optimizers = '{','.join(DISABLED_OPTIMIZERS)}'")
    threads = os.environ.get(THREADS_ENV, "").strip()
    if threads:
        if not threads.isdigit() or int(threads) < 1:
            raise StoreError(
                f"{THREADS_ENV}={threads!r} is not a number of threads",
                [Issue("DuckDB's worker threads per connection", hint=f"set {THREADS_ENV} to 1 or more, or unset it")],
            )
        con.execute(f"set threads = {int(threads)}")


open_file = _open  # for the packages above the store (the kernel corpus) that open its file


@contextlib.contextmanager
def build_lock(db_path: str | Path) -> Iterator[None]:
    """Held for a whole build (evaluation and write): a second build of the same store is
    refused at once, before it evaluates anything, naming the build that holds it.  A lock
    file ``.<store name>.lock`` beside the store (flock: released when the process ends,
    however it ends); queries are not blocked by it."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: DuckDB's own lock still guards the write
        yield
        return
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise StoreError(
                f"another archsql build is writing to the store {path} ({holder})",
                [
                    Issue(
                        "two builds of one store at a time are refused", hint="wait for it to finish, then build again"
                    )
                ],
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, started {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "select table_name from information_schema.tables "
        "where table_catalog = current_database() and table_schema = 'main' "
        "and table_type = 'BASE TABLE'"
    ).fetchall()
    return {r[0] for r in rows}


def _conform(name: str, schema: pa.Schema, table: pa.Table | None) -> pa.Table:
    """The table with exactly the contract's columns, in order, cast to its types."""
    if table is None:
        return schema.empty_table()
    missing = [c for c in schema.names if c not in table.column_names]
    extra = [c for c in table.column_names if c not in schema.names]
    if missing or extra:
        raise StoreError(
            f"table '{name}' does not match archsql.schema.tables "
            f"(missing columns: {missing or 'none'}, unexpected columns: {extra or 'none'})"
        )
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise StoreError(f"table '{name}' cannot be cast to its contract schema: {exc}") from None


def _bring_layouts_up_to_date(con, existing: set[str], models: list[str], path: Path) -> list[str]:
    """Drop the rebuilt tables of another layout (written again by the caller) and migrate the
    kept ones (:mod:`archsql.store_layout`); refuse when the rewrite would leave a stored model
    without evaluated rows.  Returns the migration notes."""
    if not existing & {*TABLES, *REFERENCE_TABLES, *KEPT}:
        return []  # a new store
    notes = []
    drifted = drift(con)
    rebuilt_evaluated = [d for d in drifted if d.table in TABLES]
    if rebuilt_evaluated:
        left = sorted(set(stored_models(con)) - set(models))
        if left:
            raise StoreError(
                f"{path}: {rebuilt_evaluated[0].describe()}; writing it again would leave {len(left)} "
                f"stored model(s) without rows: {', '.join(left[:8])}{' …' if len(left) > 8 else ''}",
                [Issue("build them too (`archsql build` evaluates every model the store holds when it repairs)")],
            )
    for d in drifted:
        if d.missing:
            continue
        if d.table in KEPT:
            notes.append(migrate_kept(con, d, path, _create_keyed))
        else:
            con.execute(f'drop table main."{d.table}"')
            existing.discard(d.table)  # written again by the caller
    return notes


def _create_keyed(con, name: str, table: pa.Table, key: tuple[str, ...]) -> None:
    _insert_arrow(con, name, table, create=True, key=key)


def _refuse_present_models(con, models: list[str]) -> None:
    present = {r[0] for r in con.execute("select model from models").fetchall()}
    clash = sorted(present.intersection(models))
    if clash:
        raise StoreError(
            f"models already in the store: {', '.join(clash)}",
            [Issue("pass replace_models=True to replace their rows")],
        )


def _write_evaluated(con, name: str, table: pa.Table, models: list[str], *, exists: bool) -> None:
    if not exists:
        _replace_table(con, name, table, exists=False)
        return
    con.execute(f'delete from "{name}" where model = any(?)', [models])
    _insert_arrow(con, name, table, create=False)


def _replace_table(con, name: str, table: pa.Table, *, exists: bool, key: tuple[str, ...] = ()) -> None:
    if exists:
        con.execute(f'delete from "{name}"')
    _insert_arrow(con, name, table, create=not exists, key=key)


def _check_keys(name: str, table: pa.Table, key: tuple[str, ...]) -> None:
    """A :class:`StoreError` naming the table, its key and each key value given more than
    once (or null): the table's primary key would refuse the rows."""
    import pyarrow.compute as pc

    issues = []
    for column in key:
        nulls = table.column(column).null_count
        if nulls:
            issues.append(Issue(f"key column '{column}' is null in {nulls} row(s)", path=f"{name}.{column}"))
    counts = table.group_by(list(key)).aggregate([([], "count_all")])
    for row in counts.filter(pc.greater(counts.column("count_all"), 1)).to_pylist():
        value = ", ".join(repr(row[c]) for c in key)
        issues.append(Issue(f"key ({', '.join(key)}) = ({value}) appears {row['count_all']} times", path=name))
    if issues:
        raise StoreError(f"table '{name}' repeats its primary key ({', '.join(key)})", issues)


def _keys_present(con, name: str, table: pa.Table, key: tuple[str, ...]) -> list[str]:
    """The keys of ``table`` (as text) that the store's table ``name`` already has."""
    alias = f"__archsql_keys_{name}"
    con.register(alias, table.select(list(key)))
    try:
        cols = ", ".join(f'"{c}"' for c in key)
        rows = con.execute(
            f'select {cols} from "{alias}" intersect select {cols} from "{name}" order by all'
        ).fetchall()
    finally:
        con.unregister(alias)
    return [", ".join(repr(v) for v in row) for row in rows]


def _insert_arrow(con, name: str, table: pa.Table, *, create: bool, key: tuple[str, ...] = ()) -> None:
    """Copy an Arrow table into DuckDB via a registered (zero-copy) scan; a created table
    has the Arrow schema's columns and, when ``key`` is given, that primary key."""
    alias = f"__archsql_in_{name}"
    cols = ", ".join(f'"{c}"' for c in table.column_names)
    con.register(alias, table)
    try:
        if create and key:
            types = con.execute(f'describe select {cols} from "{alias}"').fetchall()
            columns = ", ".join(f'"{c}" {t}' for c, t, *_ in types)
            primary = ", ".join(f'"{c}"' for c in key)
            con.execute(f'create table "{name}" ({columns}, primary key ({primary}))')
            con.execute(f'insert into "{name}" ({cols}) select {cols} from "{alias}"')
        elif create:
            con.execute(f'create table "{name}" as select {cols} from "{alias}"')
        else:
            con.execute(f'insert into "{name}" ({cols}) select {cols} from "{alias}"')
    finally:
        con.unregister(alias)


def _record_meta(con, models: list[str]) -> None:
    con.execute(
        "create table if not exists store_meta (archsql_version varchar, built_at_utc timestamp, models varchar[])"
    )
    built = datetime.now(UTC).replace(tzinfo=None)
    con.execute("insert into store_meta values (?, ?, ?)", [__version__, built, models])
