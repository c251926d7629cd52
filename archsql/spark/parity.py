"""Golden parity: every view's rows on Spark against DuckDB's, on the same store.

Rows are compared as multisets (neither engine promises an order without ORDER BY): both
sides are sorted by a key that rounds floats to 9 significant digits, then compared pairwise —
integers, text and booleans exactly, floats to ``rel`` (1e-9) relative, lists and structs
element by element.  Column names are compared case-insensitively (DuckDB's identifiers are;
the transpiled views spell every unquoted name in lower case).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

REL = 1e-9


@dataclass(frozen=True)
class Mismatch:
    view: str
    problem: str

    def __str__(self) -> str:
        return f"{self.view}: {self.problem}"


def _norm(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k.lower(): _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return value  # kept a float: compared numerically
    return value


def _key(value: Any) -> Any:
    if value is None:
        return (0, "")
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, int | float):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return (2, str(value))
        return (3, float(f"{value:.9g}"))
    if isinstance(value, dict):
        return (4, tuple((k, _key(v)) for k, v in sorted(value.items())))
    if isinstance(value, list):
        return (5, tuple(_key(v) for v in value))
    return (6, str(value))


def equal(a: Any, b: Any, rel: float = REL) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def compare(view: str, duck: pa.Table, spark: pa.Table, rel: float = REL) -> list[Mismatch]:
    """The differences between DuckDB's rows and Spark's rows of one view (none: equal)."""
    dn = [c.lower() for c in duck.column_names]
    sn = [c.lower() for c in spark.column_names]
    if dn != sn:
        return [Mismatch(view, f"columns differ: duckdb {dn} vs spark {sn}")]
    if duck.num_rows != spark.num_rows:
        return [Mismatch(view, f"{duck.num_rows} rows in duckdb, {spark.num_rows} in spark")]
    rows_d = sorted((tuple(_norm(v) for v in r.values()) for r in duck.to_pylist()), key=lambda r: [_key(v) for v in r])
    rows_s = sorted(
        (tuple(_norm(v) for v in r.values()) for r in spark.to_pylist()), key=lambda r: [_key(v) for v in r]
    )
    out = []
    for rd, rs in zip(rows_d, rows_s, strict=True):
        bad = [dn[i] for i in range(len(dn)) if not equal(rd[i], rs[i], rel)]
        if bad:
            detail = ", ".join(f"{c}: duckdb {rd[dn.index(c)]!r} vs spark {rs[dn.index(c)]!r}" for c in bad[:3])
            out.append(Mismatch(view, f"row differs ({detail})"))
            if len(out) >= 3:
                break
    return out


def duckdb_rows(db: str | Path, views: Iterable[str]) -> dict[str, pa.Table]:
    """Each view's rows from the DuckDB store, each view computed once."""
    from archsql.store import connect
    from archsql.views import computed_once

    con = connect(Path(db), read_only=True, derived=False)
    try:
        wanted = list(views)
        out = {}
        with computed_once(con, views=wanted):
            for name in wanted:
                out[name] = con.sql(f'select * from "{name}"').to_arrow_table()
        return out
    finally:
        con.close()


def spark_rows(spark, views: Iterable[str]) -> dict[str, pa.Table]:
    return {name: spark.table(f"`{name}`").toArrow() for name in views}
