"""The DuckDB store: evaluated tables, parameter tables, ``store_meta`` and the views.

``write_store`` loads the per-model Arrow tables the evaluator produced (zero-copy: each
table is registered with DuckDB and copied by ``CREATE TABLE … AS SELECT``), writes the
parameter tables with defaults when absent, records a ``store_meta`` row and (re)creates
the views.  Everything happens in one transaction, so a failed write leaves the store as
it was.  ``connect`` opens an existing store and says how to build one when there is none.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from archsql import __version__
from archsql.defaults import load_default
from archsql.errors import Issue, StoreError, did_you_mean
from archsql.evaluator.primitives.base import op_kernels_table, op_math_table
from archsql.gpus import load_gpus
from archsql.schema.fusion import fusion_rules_table
from archsql.schema.parallel import parallel_groups_table, split_deployment
from archsql.schema.tables import (
    CHECKPOINT_TABLES,
    PARAMETER_KEYS,
    PARAMETER_TABLES,
    REFERENCE_KEYS,
    REFERENCE_TABLES,
    TABLES,
)
from archsql.specs import FUSION_DIR
from archsql.views import create_views

_DEFAULTS = {
    "workloads": lambda: load_default("workloads"),
    "workload_images": lambda: PARAMETER_TABLES["workload_images"].empty_table(),  # text-only workloads
    "dtypes": lambda: load_default("dtypes"),
    "gpus": load_gpus,
    "deployments": lambda: load_default("deployments"),
    "deployment_mesh": lambda: load_default("deployment_mesh"),
    "frameworks": lambda: load_default("frameworks"),
    "deployment_frameworks": lambda: load_default("deployment_frameworks"),
    "storage_dtypes": lambda: _quant().storage_dtypes_table(),
    "checkpoint_prefixes": lambda: _quant().checkpoint_prefixes_table(),
}
_REFERENCE = {
    "parallel_groups": parallel_groups_table,
    "op_kernels": op_kernels_table,
    "op_math": op_math_table,
    "fusion_rules": lambda: fusion_rules_table(FUSION_DIR),
}


def _quant():
    from archsql.schema import quant

    return quant


_BUILD_HINT = "run `archsql build` to create the store"


def write_store(db_path: str | Path, tables: Mapping[str, pa.Table], *, replace_models: bool = True) -> None:
    """Write evaluated tables (all models concatenated) into the DuckDB file at ``db_path``.

    Rows of the models present in ``tables`` replace that model's rows already in the
    store; other models are kept.  With ``replace_models=False`` a model that is already in
    the store is an error instead.  Parameter tables given in ``tables`` replace the stored
    ones; absent ones are created with defaults once and then left to the user.
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
    con = _open(path, read_only=False)
    con.begin()
    try:
        existing = _table_names(con)
        _check_layouts(con, existing, {**TABLES, **PARAMETER_TABLES, **REFERENCE_TABLES, **CHECKPOINT_TABLES}, path)
        if not replace_models and "models" in existing:
            _refuse_present_models(con, models)
        for name, table in evaluated.items():
            _write_evaluated(con, name, table, models, exists=name in existing)
        for name in PARAMETER_TABLES:
            if name in params:
                _replace_table(con, name, params[name], exists=name in existing, key=PARAMETER_KEYS[name])
            elif name not in existing:
                default = _DEFAULTS[name]()
                _check_keys(name, default, PARAMETER_KEYS[name])
                _replace_table(con, name, default, exists=False, key=PARAMETER_KEYS[name])
        for name, rows in _REFERENCE.items():  # from code: rewritten on every build
            _replace_table(con, name, rows(), exists=name in existing, key=REFERENCE_KEYS[name])
        for name, schema in CHECKPOINT_TABLES.items():  # filled by write_checkpoint
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        _record_meta(con, models)
        create_views(con)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()  # after commit or rollback


def write_checkpoint(db_path: str | Path, table: pa.Table, *, model: str, profile: str = "native") -> str:
    """Load one checkpoint's ``checkpoint_tensors`` (``archsql.ingest.read_checkpoint``) into the
    store and map it to the model (and storage profile) it is reconciled against; rows of the
    same checkpoint id are replaced.  Returns the checkpoint id."""
    table = _conform("checkpoint_tensors", CHECKPOINT_TABLES["checkpoint_tensors"], table)
    ids = table.column("checkpoint").unique().to_pylist()
    if len(ids) != 1:
        raise StoreError(f"write_checkpoint takes the tensors of one checkpoint, got {len(ids)} checkpoint ids")
    checkpoint = ids[0]
    con = connect(db_path, read_only=False)
    con.begin()
    try:
        known = {r[0] for r in con.execute("select model from models").fetchall()}
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
        existing = _table_names(con)
        for name, schema in CHECKPOINT_TABLES.items():
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        con.execute("delete from checkpoint_tensors where checkpoint = ?", [checkpoint])
        con.execute("delete from checkpoints where checkpoint = ?", [checkpoint])
        _insert_arrow(con, "checkpoint_tensors", table, create=False)
        mapping = pa.Table.from_pylist(
            [{"checkpoint": checkpoint, "model": model, "profile": profile}], schema=CHECKPOINT_TABLES["checkpoints"]
        )
        _insert_arrow(con, "checkpoints", mapping, create=False)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()
    return checkpoint


def insert_deployments(
    con: duckdb.DuckDBPyConnection, rows: list[Mapping[str, object]], *, like: str | None = None
) -> None:
    """Insert deployments written one mapping each — the ``deployments`` columns and the
    degree of each mesh axis by name (``tp=8, ep=8``; an axis not given has its default) —
    into ``deployments`` and ``deployment_mesh``, by column name.  With ``like``, every
    field not given is the named deployment's (its mesh and framework included).  ``framework``
    names the serving framework (``deployment_frameworks``) whose default memory fraction
    applies when ``usable_memory_fraction`` is not given."""
    columns = PARAMETER_TABLES["deployments"].names
    base: dict[str, object] = {}
    if like is not None:
        found = con.sql("select * from deployments where deployment = ?", params=[like]).to_arrow_table().to_pylist()
        if not found:
            raise StoreError(f"no deployment '{like}' to copy")
        base = found[0]
        base.update(con.execute("select axis, degree from deployment_mesh where deployment = ?", [like]).fetchall())
        framework = con.execute("select framework from deployment_frameworks where deployment = ?", [like]).fetchall()
        if framework:
            base["framework"] = framework[0][0]
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


def keep_deployments(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove every deployment not in ``names`` (its mesh and framework rows with it): a store
    whose views answer only the deployments a question is about."""
    keep = sorted(set(names))
    for table in ("deployment_mesh", "deployment_frameworks", "deployments"):
        con.execute(f"delete from {table} where deployment not in (select unnest(?::varchar[]))", [keep])


def remove_deployments(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove the named deployments with their mesh and framework rows (the complement of
    :func:`keep_deployments`)."""
    drop = sorted(set(names))
    for table in ("deployment_mesh", "deployment_frameworks", "deployments"):
        con.execute(f"delete from {table} where deployment in (select unnest(?::varchar[]))", [drop])


def remove_workloads(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Remove the named workloads with their image rows."""
    drop = sorted(set(names))
    for table in ("workload_images", "workloads"):
        con.execute(f"delete from {table} where workload in (select unnest(?::varchar[]))", [drop])


def insert_rows(con: duckdb.DuckDBPyConnection, name: str, rows: list[Mapping[str, object]]) -> None:
    """Insert rows (one mapping each, by column name; a column not given is null) into the
    parameter table ``name``.  A key given twice, or already in the table, is a
    :class:`StoreError` naming the table, its key and the values; nothing is inserted."""
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


def connect(db_path: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open an existing store; a missing or empty file is a :class:`StoreError`."""
    path = Path(db_path)
    if not path.is_file():
        raise StoreError(f"no archsql store at {path}; {_BUILD_HINT}")
    con = _open(path, read_only=read_only)
    expected = (*TABLES, *PARAMETER_TABLES, *REFERENCE_TABLES)
    missing = [name for name in expected if name not in _table_names(con)]
    if missing:
        con.close()
        what = (
            "has no archsql tables"
            if len(missing) == len(expected)
            else f"is incomplete (missing tables: {', '.join(missing)})"
        )
        raise StoreError(f"{path} {what}; {_BUILD_HINT}")
    return con


# -- helpers -------------------------------------------------------------------------------


# How long opening a store waits while another process holds its write lock (a build or an
# import writes for a few seconds): long enough for a write window, short enough not to hang.
LOCK_WAIT_S = 30.0


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file; while another process holds its lock, wait and retry (up to
    ``$ARCHSQL_LOCK_WAIT_S``, default LOCK_WAIT_S seconds), then a :class:`StoreError`."""
    try:
        wait = float(os.environ.get("ARCHSQL_LOCK_WAIT_S", LOCK_WAIT_S))
    except ValueError:
        wait = LOCK_WAIT_S
    deadline = time.monotonic() + max(wait, 0.0)
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
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


def _check_layouts(con, existing: set[str], schemas: Mapping[str, pa.Schema], path: Path) -> None:
    for name, schema in schemas.items():
        if name not in existing:
            continue
        cols = [r[0] for r in con.execute(f'describe "{name}"').fetchall()]
        if cols != schema.names:
            raise StoreError(
                f"{path}: table '{name}' has columns {cols}, this archsql expects "
                f"{schema.names}; delete the file and run `archsql build`"
            )


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
