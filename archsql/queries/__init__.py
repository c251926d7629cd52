"""Saved named queries: one ``.sql`` file each, run read-only against the store.

A report is just a query: ``archsql query NAME`` or :func:`run` runs one, :func:`saved`
lists them with the first comment line as description.  A query that reads a part only some
stores hold (the kernel corpus, saved sweeps: :func:`optional_relations`) and runs on a store
without it fails with a :class:`QueryError` naming the part and how to add it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyarrow as pa

from archsql.errors import Issue, QueryError, unknown_name

QUERIES_DIR = Path(__file__).parent


def saved() -> dict[str, str]:
    """name -> description (the file's first ``--`` comment line)."""
    out = {}
    for path in sorted(QUERIES_DIR.glob("*.sql")):
        first = path.read_text(encoding="utf-8").splitlines()[0] if path.stat().st_size else ""
        out[path.stem] = first.removeprefix("--").strip()
    return out


def text(name: str) -> str:
    """The SQL of the saved query ``name``: a name of :func:`saved`, never a path (a name with
    a path separator, ``..`` or a suffix is refused before any file is opened)."""
    known = saved()
    if name not in known:
        message, hint = unknown_name("saved query", name, known)
        why = (
            "a saved query is a name, not a path (archsql sql runs a query of your own)"
            if any(ch in name for ch in "/\\") or name.startswith(".") or name.endswith(".sql")
            else None
        )
        raise QueryError(f"{message}; {hint}", [Issue(why)] if why else [])
    return (QUERIES_DIR / f"{name}.sql").read_text(encoding="utf-8")


def run(name: str, db: str | Path | None = None) -> pa.Table:
    """The rows of the saved query ``name`` on the store ``db``; a store without a part the
    query reads (:func:`optional_relations`) is a :class:`QueryError` saying which and how to add it."""
    from archsql.api import query

    sql = text(name)
    try:
        return query(sql, db=db)
    except QueryError:
        missing = missing_parts(sql, db)
        if not missing:
            raise
        raise missing_part_error(f"saved query '{name}'", missing, db) from None


# ---------------------------------------------------------------------------- optional parts


@dataclass(frozen=True)
class Part:
    """A part of a store that only some stores hold, and how to add it."""

    name: str
    how: str


CORPUS = Part(
    "a kernel corpus",
    "import measured kernels into it: archsql corpus import aiconfigurator (or archsql corpus import FILE.csv)",
)
SWEEPS = Part("a saved sweep", "save one into it: archsql sweep MODEL … --save NAME")


@cache
def optional_relations() -> dict[str, Part]:
    """relation -> the optional part that brings it into a store: the kernel corpus's tables
    and views (archsql/kernel_corpus/views, its schema's tables) and the saved sweeps'."""
    from archsql.kernel_corpus.schema import TABLES as CORPUS_TABLES
    from archsql.kernel_corpus.storage import VIEWS_DIR
    from archsql.sweep import SAVED_TABLES

    corpus = {"kernel_corpus", *CORPUS_TABLES}
    corpus |= {f.stem for f in VIEWS_DIR.glob("*/*.sql") if f.parent.name != "macros"}
    return {**dict.fromkeys(sorted(corpus), CORPUS), **dict.fromkeys(SAVED_TABLES, SWEEPS)}


def missing_parts(sql: str, db: str | Path | None = None) -> dict[Part, list[str]]:
    """The optional parts ``sql`` reads that the store ``db`` lacks: part -> its relations read."""
    import duckdb

    from archsql.api import query
    from archsql.views import relations_read

    with duckdb.connect() as con:
        read = relations_read(con, sql) or set()
    wanted = {r: part for r, part in optional_relations().items() if r in read}
    if not wanted:
        return {}
    present = set(
        query("select table_name as name from duckdb_tables() union select view_name from duckdb_views()", db=db)
        .column("name")
        .to_pylist()
    )
    out: dict[Part, list[str]] = {}
    for relation, part in wanted.items():
        if relation not in present:
            out.setdefault(part, []).append(relation)
    return out


def missing_part_error(what: str, missing: dict[Part, list[str]], db: str | Path | None = None) -> QueryError:
    """``what`` reads relations of parts the store lacks: what is missing and how to add it."""
    from archsql.api import default_db

    where = Path(db) if db else default_db()
    parts = " and ".join(p.name for p in missing)
    reads = ", ".join(r for relations in missing.values() for r in relations)
    return QueryError(
        f"{what} reads {reads}, which only a store with {parts} has; the store {where} has none",
        [Issue(part.how) for part in missing],
    )
