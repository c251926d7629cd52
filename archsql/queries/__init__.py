"""Saved named queries: one ``.sql`` file each, run read-only against the store.

A report is just a query: ``archsql query NAME`` or :func:`run` runs one, :func:`saved`
lists them with the first comment line as description.
"""

from __future__ import annotations

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
    from archsql.api import query

    return query(text(name), db=db)
