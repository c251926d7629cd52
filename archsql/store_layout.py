"""The store's table layout against this archsql's contracts, and how a store written by
another version is brought up to date without losing what a person put in it.

A table's layout is its column names and DuckDB types, in order; the contract is the Arrow
schema in :mod:`archsql.schema.tables`.  Tables fall in two kinds:

* **rebuilt** — the evaluated tables (from the specs) and the reference tables (from code):
  a table of another layout is dropped and written again.  The evaluated rows of every model
  the store holds must then be evaluated again, so a build of some models also evaluates the
  store's other models (:func:`models_to_repair`), never leaving them without rows.
* **kept** — the parameter tables and the checkpoint tables: what the user wrote.  A table
  of another layout is first saved as CSV next to the store, then its rows are copied into
  the new layout by column name (a new column starts empty, a column this version dropped is
  named in the note); the parameter check views flag any row the new layout finds invalid.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql.errors import Issue, StoreError
from archsql.schema.tables import CHECKPOINT_TABLES, PARAMETER_KEYS, PARAMETER_TABLES, REFERENCE_TABLES, TABLES

REBUILT: dict[str, pa.Schema] = {**TABLES, **REFERENCE_TABLES}
KEPT: dict[str, pa.Schema] = {**PARAMETER_TABLES, **CHECKPOINT_TABLES}
Layout = tuple[tuple[str, str], ...]  # (column, DuckDB type) in order


@dataclass(frozen=True)
class Drift:
    """A table whose layout in the store is not the contract's (``found`` empty: missing)."""

    table: str
    found: Layout
    expected: Layout

    @property
    def missing(self) -> bool:
        return not self.found

    def describe(self) -> str:
        if self.missing:
            return f"table '{self.table}' is missing"
        found, expected = dict(self.found), dict(self.expected)
        parts = []
        if added := [c for c in expected if c not in found]:
            parts.append(f"lacks {', '.join(added)}")
        if dropped := [c for c in found if c not in expected]:
            parts.append(f"has {', '.join(dropped)} that this archsql does not use")
        if retyped := [f"{c} {found[c]} (now {t})" for c, t in expected.items() if c in found and found[c] != t]:
            parts.append(f"types {', '.join(retyped)}")
        return f"table '{self.table}' " + ("; ".join(parts) or "has its columns in another order")


@functools.cache
def contract_digest() -> str:
    """A digest of every contract schema (cheap: no DuckDB), part of the derived tables'
    fingerprint, so rows computed under another layout are never read as fresh."""
    text = "|".join(f"{name}:{schema}" for name, schema in sorted({**REBUILT, **KEPT}.items()))
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


@functools.cache
def expected_layouts() -> dict[str, Layout]:
    """The DuckDB layout of every contract table (as DuckDB would create it from Arrow)."""
    con = duckdb.connect()
    try:
        out = {}
        for name, schema in {**REBUILT, **KEPT}.items():
            con.register("contract", schema.empty_table())
            out[name] = tuple((c, t) for c, t, *_ in con.execute("describe select * from contract").fetchall())
            con.unregister("contract")
        return out
    finally:
        con.close()


def found_layouts(con: duckdb.DuckDBPyConnection) -> dict[str, Layout]:
    """The layout of every table in the store's main schema (one catalog query)."""
    rows = con.execute(
        "select table_name, column_name, data_type from duckdb_columns() "
        "where database_name = current_database() and schema_name = 'main' order by table_name, column_index"
    ).fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in rows:
        out.setdefault(table, []).append((column, dtype))
    return {t: tuple(cols) for t, cols in out.items()}


def drift(con: duckdb.DuckDBPyConnection, tables: Iterable[str] | None = None) -> list[Drift]:
    """The contract tables (all, or ``tables``) whose layout in the store differs; a missing
    table is listed only among the evaluated tables when others are present (a store never built
    has no tables: that is not drift)."""
    expected = expected_layouts()
    found = found_layouts(con)
    names = list(tables) if tables is not None else list(expected)
    return [Drift(n, found.get(n, ()), expected[n]) for n in names if found.get(n, ()) != expected[n]]


def stored_models(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """model → the spec file it was built from (None when unknown), for every model with rows
    in any evaluated table the store still has."""
    found = found_layouts(con)
    models: dict[str, str | None] = {}
    if "models" in found and {"model", "spec_file"} <= {c for c, _ in found["models"]}:
        models.update(con.execute("select model, spec_file from main.models").fetchall())
    for table in TABLES:
        if table != "models" and "model" in {c for c, _ in found.get(table, ())}:
            for (model,) in con.execute(f'select distinct model from main."{table}"').fetchall():
                models.setdefault(model, None)
    return models


def models_to_repair(
    con: duckdb.DuckDBPyConnection, db: Path, building: Iterable[str], catalog: Iterable[str]
) -> list[str]:
    """What a build of ``building`` (model names or spec paths) must also evaluate so that no
    model of the store ``con`` (the file ``db``) is left without rows: when an evaluated table
    is missing or of another layout, every model the store holds and the build does not name
    (as a catalog name, or its spec path when it is not a catalog model).  Empty when the store
    is sound or new.  A model whose spec cannot be found is a :class:`StoreError` naming it."""
    if not any(t in found_layouts(con) for t in TABLES):
        return []  # never built: nothing to keep
    broken = drift(con, TABLES)
    if not broken:
        return []
    models = stored_models(con)
    named = {str(b) for b in building}
    named_paths = {Path(b).resolve() for b in named if b.endswith((".yaml", ".yml"))}
    known = set(catalog)
    extra, lost = [], []
    for model, spec in sorted(models.items()):
        if model in named:
            continue
        if model in known:
            extra.append(model)
        elif spec and Path(spec).is_file():
            if Path(spec).resolve() not in named_paths:
                extra.append(spec)
        else:
            lost.append(model)
    if lost:
        raise StoreError(
            f"{db}: {broken[0].describe()}, so every model in the store is evaluated again, but the spec of "
            f"{', '.join(lost)} cannot be found",
            [Issue("give their spec files to the same build (archsql build SPEC.yaml …), or remove them first")],
        )
    return extra


def migrate_kept(con: duckdb.DuckDBPyConnection, drifted: Drift, path: Path, create) -> str:
    """Bring a parameter or checkpoint table to this archsql's layout, in the caller's
    transaction: save it as CSV next to the store, copy its rows by column name into the new
    layout (``create(con, name, empty_table, key)`` makes the table), and return a note for the
    user.  Rows the new layout cannot hold are a :class:`StoreError` (the transaction is rolled
    back: nothing is lost)."""
    name = drifted.table
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    backup = path.with_name(f"{path.name}.{name}.{stamp}.csv")
    con.execute(f"copy main.\"{name}\" to '{_sql_text(str(backup))}' (header, delimiter ',')")
    old = f"__archsql_migrate_{name}"
    con.execute(f'create temp table "{old}" as select * from main."{name}"')
    con.execute(f'drop table main."{name}"')
    create(con, name, KEPT[name].empty_table(), PARAMETER_KEYS.get(name, ()))
    found = [c for c, _ in drifted.found]
    common = [c for c, _ in drifted.expected if c in found]
    cols = ", ".join(f'"{c}"' for c in common)
    try:
        con.execute(f'insert into main."{name}" ({cols}) select {cols} from temp.main."{old}"')
    except duckdb.Error as exc:
        raise StoreError(
            f"table '{name}' of this store cannot be brought to the layout of this archsql: {exc}",
            [Issue(f"its rows are saved in {backup}", hint="fix them there, drop the table and insert them again")],
        ) from None
    con.execute(f'drop table temp.main."{old}"')  # (after an error the rollback drops it)
    return f"{drifted.describe()}: its rows were copied into the new layout (saved first as {backup})"


def _sql_text(text: str) -> str:
    return text.replace("'", "''")


def layout_error(path: Path, drifted: list[Drift], version: str | None) -> StoreError:
    """What a reader is told about a store of another layout: build it up to date, keeping
    the user's tables (never: delete the file)."""
    by = f"archsql {version}" if version else "another archsql"
    return StoreError(
        f"{path} was written by {by} with another table layout ({drifted[0].describe()}"
        + (f", and {len(drifted) - 1} more" if len(drifted) > 1 else "")
        + ")",
        [
            Issue(
                "run `archsql build` to bring it up to date",
                hint="parameter tables and checkpoints are kept (saved as CSV next to the store first); "
                "evaluated tables are written again",
            )
        ],
    )


def recorded_version(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        rows = con.execute("select archsql_version from main.store_meta order by built_at_utc desc limit 1").fetchall()
    except duckdb.Error:
        return None
    return rows[0][0] if rows else None
