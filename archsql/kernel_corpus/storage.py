"""Where the corpus lives: append-only Parquet partitions in a folder next to the store,
registered in the store as the view ``kernel_corpus``.

Layout.  For the store ``archsql.duckdb`` the corpus folder is ``archsql.kernel_corpus/``.
Every import writes one Parquet file, ``<origin>/<batch>.parquet`` (``batch``: a hash of
the source versions it holds), with the rows it kept in the ``kernel_corpus`` schema —
provenance columns included, so a file says what it holds — sorted by GPU, op kind,
library and version so that filtered reads skip row groups.  A file is written once, under
a content-derived name, moved into the folder only after the import's transaction commits,
and never rewritten: the folder is the append-only record.  ``schema/kernel_corpus.parquet``
(no rows) fixes the schema of an empty corpus.

In the store, ``kernel_corpus`` is a view over ``read_parquet('<folder>/*/*.parquet')``
(the absolute path of the folder; :func:`open_corpus` re-points it), so every DuckDB client
sees the measurements without a second copy; ``archsql sql`` reads them because
The package registers :func:`corpus_dir` with :func:`archsql.api.register_readable_dir`, which
admits that one folder to an otherwise file-less query connection.
The import bookkeeping — ``kernel_corpus_sources`` (one row per source version: where it
came from, its partition file, rows read / kept / rejected / already present, versions)
and ``kernel_corpus_rejects`` (every problem of every rejected row) — are tables of the
store.  :func:`sync` registers partitions copied in from another corpus.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from archsql import __version__
from archsql.errors import Issue, StoreError
from archsql.kernel_corpus.registry import dtype_names_table, op_kinds_table
from archsql.kernel_corpus.schema import CORPUS_SCHEMA, SOURCES_SCHEMA, TABLES, sql_type

VIEWS_DIR = Path(__file__).with_name("views")
SCHEMA_PARTITION = "schema/kernel_corpus.parquet"
# What the corpus reads from the model store: parameter tables and their views (measured_vs_sol:
# the deployments' kernel signatures and speed of light).
STORE_RELATIONS = ("gpus", "dtypes", "base_dtypes", "int_gpu_specs", "int_node_kernels", "kernel_signatures", "op_sol")


def corpus_dir(db: str | Path) -> Path:
    """The partition folder of the store ``db``: ``<stem>.kernel_corpus`` beside it."""
    db = Path(db).absolute()
    return db.with_name(f"{db.stem}.kernel_corpus")


def partitions_glob(db: str | Path) -> str:
    return str(corpus_dir(db) / "*" / "*.parquet")


def open_corpus(db: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-write connection to ``db`` with the corpus view, tables, registry and views
    in place.  A missing store (or one without the GPU and dtype tables the corpus checks
    against) is first initialized with the model store's parameter tables and views."""
    path = Path(db)
    if not _store_complete(path):
        from archsql.store import write_store

        # the store's missing tables (parameter tables with their defaults) and the model views
        write_store(path, {})
    _ensure_schema_partition(path)
    from archsql.store import open_file

    con = open_file(path, read_only=False)
    try:
        con.execute("set enable_progress_bar = false")
        con.begin()
        _ensure_tables(con, path)
        con.execute(f"create or replace view kernel_corpus as {_partitions_sql(path)}")
        _replace(con, "kernel_op_kinds", op_kinds_table())
        _replace(con, "kernel_dtype_names", dtype_names_table())
        from archsql.views import create_macros, create_views, sources_current

        # the model store's macros and the corpus's macros and views, recreated only when their
        # files changed (each reopen recreated every view: seconds per corpus operation)
        if not (sources_current(con, kinds=("macro",)) and sources_current(con, VIEWS_DIR)):
            create_macros(con)  # the model store's macros (window_pairs), which the kernel_* macros call
            create_views(con, VIEWS_DIR)
        con.commit()
    except BaseException:
        con.rollback()
        con.close()
        raise
    return con


def connect_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the store with a corpus; the model views read the store's
    derived tables while they are current (:func:`archsql.store.connect`)."""
    from archsql.store import connect

    path = Path(db)
    if not path.is_file():
        raise StoreError(f"no archsql store at {path}; import a corpus or run `archsql build` first")
    con = connect(path, read_only=True)  # waits for a writer as every store connection does
    if "kernel_corpus_sources" not in _tables(con):
        con.close()
        raise StoreError(f"{path} has no kernel corpus; run `archsql corpus import aiconfigurator` (or a file)")
    con.execute("set enable_progress_bar = false")
    point_view(con, path)
    return con


def sync(db: str | Path) -> dict[str, int]:
    """Make the store's sources and the corpus folder agree, in both directions:

    * a source whose partition file is gone (deleted, or lost by a crash of an older archsql
      between its commit and its file move) is unregistered, with its rejects, so that
      importing it again brings its rows back (``unregistered``);
    * the sources of partition files the store does not know (a corpus folder copied from
      elsewhere, or a file published by an import that crashed before its commit) are
      registered with what each file tells: source, key, hash, rows (``files``, ``sources``).

    Staging folders of imports that died are removed (``staging_removed``).  Returns the counts."""
    folder = corpus_dir(db)
    con = open_corpus(db)
    files = sources = 0
    try:
        staging = clean_staging(folder)
        con.begin()
        try:
            unregistered = _unregister_missing(con, folder)
            known = {r[0] for r in con.execute("select source_hash from kernel_corpus_sources").fetchall()}
            now = datetime.now(UTC).replace(tzinfo=None)
            for path in sorted(folder.glob("*/*.parquet")):
                rel = path.relative_to(folder).as_posix()
                found = con.execute(
                    "select source_hash, any_value(source), any_value(source_key), count(*) "
                    "from read_parquet($p) group by source_hash order by source_hash",
                    {"p": str(path)},
                ).fetchall()
                rows = []
                for source_hash, source, key, n in found:
                    if source_hash in known:
                        continue
                    row = dict.fromkeys(SOURCES_SCHEMA.names)
                    row.update(
                        source=source,
                        source_key=key,
                        source_hash=source_hash,
                        origin=path.parent.name,
                        location=rel,
                        partition_file=rel,
                        rows_kept=n,
                        imported_at=now,
                        archsql_version=__version__,
                    )
                    rows.append(row)
                    known.add(source_hash)
                if rows:
                    _append(con, "kernel_corpus_sources", pa.Table.from_pylist(rows, schema=SOURCES_SCHEMA))
                    files += 1
                    sources += len(rows)
            con.commit()
        except BaseException:
            con.rollback()
            raise
    finally:
        con.close()
    return {"files": files, "sources": sources, "unregistered": unregistered, "staging_removed": staging}


def missing_partitions(con: duckdb.DuckDBPyConnection, folder: Path) -> list[tuple[str, str]]:
    """(source_hash, partition_file) of the sources whose partition file is not in ``folder``."""
    claimed = con.execute(
        "select source_hash, partition_file from kernel_corpus_sources where partition_file is not null"
    ).fetchall()
    return [(h, rel) for h, rel in claimed if not (folder / rel).is_file()]


def _unregister_missing(con: duckdb.DuckDBPyConnection, folder: Path) -> int:
    """Drop the sources (and their rejects) whose partition file is missing; returns how many."""
    missing = [h for h, _ in missing_partitions(con, folder)]
    if missing:
        for table in ("kernel_corpus_rejects", "kernel_corpus_sources"):
            con.execute(f"delete from {table} where source_hash in (select unnest($h))", {"h": missing})
    return len(missing)


STAGING_PREFIX = ".import-"


def staging_dir(folder: Path) -> Path:
    """A fresh staging folder of this process in the corpus folder (same file system as the
    partitions, so publishing a file is an atomic rename)."""
    return folder / f"{STAGING_PREFIX}{os.getpid()}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"


def clean_staging(folder: Path) -> int:
    """Remove the staging folders of imports that are no longer running (killed, or crashed
    before their cleanup): those of other processes that are gone.  Returns how many."""
    removed = 0
    for path in folder.glob(f"{STAGING_PREFIX}*"):
        pid = path.name[len(STAGING_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and (int(pid) == os.getpid() or _alive(int(pid))):
            continue  # an import still running (this process's own included)
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Persist the entries of ``path`` (a rename into it) where the platform allows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- helpers -------------------------------------------------------------------------------


def _partitions_sql(db: str | Path) -> str:
    """The rows of the partition files that a committed ``kernel_corpus_sources`` row names:
    a file written by an import that never committed (a crash) holds no visible row, and a
    source's rows are read from its own file only (never twice)."""
    cols = ", ".join(f"p.{c}" for c in CORPUS_SCHEMA.names)
    glob = partitions_glob(db).replace("'", "''")
    return (
        f"select {cols} from read_parquet('{glob}', union_by_name = true, filename = '__partition') as p "
        "where exists (select 1 from kernel_corpus_sources as s where s.source_hash = p.source_hash "
        "and s.partition_file = regexp_extract(replace(p.__partition, '\\', '/'), '[^/]+/[^/]+$'))"
    )


def point_view(con: duckdb.DuckDBPyConnection, db: str | Path) -> None:
    """Point ``kernel_corpus`` of this connection at the corpus folder beside ``db`` as it is
    now (a temporary view shadowing the stored one), so a store moved or copied together with
    its corpus folder answers from its own folder, also read-only.  A store without a corpus
    is left alone."""
    if "kernel_corpus_sources" not in _tables(con):
        return
    if any(corpus_dir(db).glob("*/*.parquet")):
        rows = _partitions_sql(db)
    else:  # no corpus folder beside the store (copied without it): no measurement
        cols = ", ".join(f"null::{sql_type(f.type)} as {f.name}" for f in CORPUS_SCHEMA)
        rows = f"select {cols} where false"
    con.execute(f"create or replace temp view kernel_corpus as {rows}")


def _ensure_schema_partition(db: Path) -> None:
    target = corpus_dir(db) / SCHEMA_PARTITION
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(CORPUS_SCHEMA.empty_table(), target)


def _append(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("__archsql_rows", table)
    con.execute(f'insert into "{name}" select * from __archsql_rows')
    con.unregister("__archsql_rows")


def _store_complete(path: Path) -> bool:
    """Whether ``path`` is a store with every table of this archsql and the relations the
    corpus reads (a store built by an older archsql gets its new tables added)."""
    from archsql.store import connect

    if not path.is_file():
        return False
    try:
        connect(path, read_only=True).close()
    except StoreError:
        return False
    return _has_relations(path, STORE_RELATIONS)


def _has_relations(path: Path, names: tuple[str, ...]) -> bool:
    from archsql.store import open_file

    con = open_file(path, read_only=True)
    try:
        rows = con.execute(
            "select table_name from information_schema.tables "
            "where table_catalog = current_database() and table_schema = 'main'"
        ).fetchall()
        return set(names) <= {r[0] for r in rows}
    finally:
        con.close()


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "select table_name from information_schema.tables "
        "where table_catalog = current_database() and table_schema = 'main' and table_type = 'BASE TABLE'"
    ).fetchall()
    return {r[0] for r in rows}


def _ensure_tables(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    existing = _tables(con)
    for name, schema in TABLES.items():
        if name in existing:
            cols = [r[0] for r in con.execute(f'describe "{name}"').fetchall()]
            if cols != schema.names:
                raise StoreError(
                    f"{path}: table '{name}' has columns that this archsql does not expect",
                    [
                        Issue(
                            "the corpus tables were written by another archsql version",
                            expected=", ".join(schema.names),
                            got=", ".join(cols),
                            hint=f"drop the kernel_corpus_* tables and run `archsql corpus sync` to register "
                            f"the partitions of {corpus_dir(path)} again",
                        )
                    ],
                )
            continue
        con.register("__archsql_empty", schema.empty_table())
        con.execute(f'create table "{name}" as select * from __archsql_empty')
        con.unregister("__archsql_empty")


def _replace(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("__archsql_registry", table)
    con.execute(f'create or replace table "{name}" as select * from __archsql_registry')
    con.unregister("__archsql_registry")
