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


# a float rounded to 10 significant digits: two floats in one bucket differ by less than 1e-9
# relative (a bucket of [10^k, 10^(k+1)) is 10^(k-9) wide)
_SIG = "(case when {x} is null or {x} = 0 or not isfinite({x}) then {x} else round({x}, 9 - floor(log10(abs({x})))::int) end)"
_FLOATS = ("DOUBLE", "FLOAT", "REAL")


def _canonical(column: str, dtype: str) -> str:
    """A column of either engine's rows in one comparable form: numbers that hold fractions
    (floats, decimals) as DOUBLE rounded to 10 significant digits, integers as HUGEINT
    (DuckDB sums BIGINT to HUGEINT, Spark to BIGINT), lists of floats element-wise; the rest
    as it is."""
    q = '"' + column.replace('"', '""') + '"'
    t = dtype.upper()
    if t.endswith("[]"):
        inner = t[:-2]
        if inner in _FLOATS or (inner.startswith("DECIMAL") and "[" not in inner):
            return f"list_transform({q}, lambda v: {_SIG.format(x='v::double')})"
        return q
    if t in _FLOATS or t.startswith("DECIMAL"):
        return _SIG.format(x=f"{q}::double")
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"):
        return f"{q}::hugeint"
    return q


def compare_parquet(con, view: str, relation: str, spark_files: str | Path, rel: float = REL) -> list[Mismatch]:
    """One view's rows: DuckDB's (``relation`` on ``con``) against Spark's (the Parquet files
    Spark wrote, read by DuckDB) — neither side held in Python.  Both sides are put in one
    form (:func:`_canonical`) and subtracted as multisets in DuckDB (``except all``); the
    rows whose form is left on either side (a float on two sides of a rounding boundary, a
    float inside a struct, a real difference) are taken whole from each engine's rows and
    compared in Python by :func:`compare` at ``rel``."""
    spark_rel = f"read_parquet('{Path(spark_files).as_posix()}/*.parquet')"
    d_cols = con.execute(f"describe select * from {relation}").fetchall()
    s_cols = con.execute(f"describe select * from {spark_rel}").fetchall()
    dn = [c[0].lower() for c in d_cols]
    sn = [c[0].lower() for c in s_cols]
    if dn != sn:
        return [Mismatch(view, f"columns differ: duckdb {dn} vs spark {sn}")]
    ((nd,),) = con.execute(f"select count(*) from {relation}").fetchall()
    ((ns,),) = con.execute(f"select count(*) from {spark_rel}").fetchall()
    if nd != ns:
        return [Mismatch(view, f"{nd} rows in duckdb, {ns} in spark")]
    keys = [f"_k{i}" for i in range(len(d_cols))]
    d_sel = ", ".join(f"{_canonical(c[0], c[1])} as _k{i}" for i, c in enumerate(d_cols))
    s_sel = ", ".join(f"{_canonical(c[0], c[1])} as _k{i}" for i, c in enumerate(s_cols))
    con.execute(f"create or replace temp view __parity_d as select {d_sel}, * from {relation}")
    con.execute(f"create or replace temp view __parity_s as select {s_sel}, * from {spark_rel}")
    k = ", ".join(keys)
    try:
        left = {}
        for side, other in (("d", "s"), ("s", "d")):
            con.execute(
                f"create or replace temp table __parity_left_{side} as "
                f"select {k} from __parity_{side} except all select {k} from __parity_{other}"
            )
            ((n,),) = con.execute(f"select count(*) from __parity_left_{side}").fetchall()
            left[side] = n
        if not left["d"] and not left["s"]:
            return []
        if max(left.values()) > 100_000:
            return [Mismatch(view, f"{left['d']} rows of duckdb and {left['s']} of spark have no equal row")]
        on = " and ".join(f"x.{c} is not distinct from l.{c}" for c in keys)
        rows = {
            side: con.sql(
                f"select x.* exclude ({k}) from __parity_{side} as x "
                f"where exists (select 1 from __parity_left_{side} as l where {on})"
            ).to_arrow_table()
            for side in ("d", "s")
        }
        return compare(view, rows["d"], rows["s"], rel)
    finally:
        for name in ("__parity_left_d", "__parity_left_s"):
            con.execute(f"drop table if exists {name}")
        for name in ("__parity_d", "__parity_s"):
            con.execute(f"drop view if exists {name}")


def compare_views(
    spark, db: str | Path, views: Iterable[str], workdir: str | Path, rel: float = REL, memory_limit: str = "2GB"
):
    """Every view of ``views`` (created on ``spark``, in dependency order) against the DuckDB
    store ``db``: Spark writes each view's rows to ``workdir/<view>/`` as Parquet, DuckDB
    computes each view once (:func:`archsql.views.computed_once`) and compares
    (:func:`compare_parquet`).  Yields ``(view, rows, mismatches)``, one view at a time."""
    from archsql.store import connect
    from archsql.views import computed_once

    wanted = list(views)
    con = connect(Path(db), read_only=True, derived=False)
    # every view computed once is a temporary table: the full catalog's ~10 M rows held in
    # memory beside Spark's JVM got the process killed (OOM, 7.5 GB); spill them to disk
    con.execute(f"set memory_limit = '{memory_limit}'")
    con.execute(f"set temp_directory = '{(Path(workdir) / '.duckdb_spill').as_posix()}'")
    try:
        with computed_once(con, views=wanted):
            for name in wanted:
                out = Path(workdir) / name
                spark.table(f"`{name}`").write.mode("overwrite").parquet(str(out))
                ((rows,),) = con.execute(f'select count(*) from "{name}"').fetchall()
                yield name, rows, compare_parquet(con, name, f'"{name}"', out, rel)
    finally:
        con.close()
