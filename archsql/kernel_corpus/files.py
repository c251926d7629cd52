"""Measurements from a CSV or Parquet file: columns named as ``kernel_corpus`` columns.

A file has one measurement per row.  Columns are the corpus signature columns (``op_kind``,
``gpu``, ``library``, ``dtype``, ``m``, ``n``, ``k``, ``batch``, ...; any subset, each op
kind needs its own fields, see ``kernel_op_kinds.required``) and one time, either
``latency_<unit>`` (``latency_s``, ``latency_ms``, ``latency_us``, ``latency_ns``) or
``latency`` with a ``latency_unit`` column saying, per row, s / ms / us / ns.  Times are
stored in microseconds.  Provenance columns (``source``, ``source_key``, ``source_hash``,
``source_row``) are set by the importer; an unknown column, a repeated one, or a missing
``op_kind`` / ``gpu`` / ``library`` / time rejects the whole file (nothing imported, every problem
listed).  Row problems — a row with too few fields, a non-numeric number, an unknown op
kind, GPU, dtype or unit, a missing field its op kind needs, a repeated row, an implied
MFU/MBU above 1 — reject that row with its line (CSV) or row (Parquet) and reason; the
good rows are kept.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from archsql.errors import CorpusError, Issue, did_you_mean
from archsql.kernel_corpus.ingest import ISSUE_TYPE, CorpusWriter, IngestReport, Source, file_sha256
from archsql.kernel_corpus.registry import TIME_UNITS
from archsql.kernel_corpus.schema import CORPUS_SCHEMA, PROVENANCE, sql_type

TIME_COLUMNS = {f"latency_{unit}": unit for unit in TIME_UNITS}
UNIT_ALIASES = {"µs": "us", "μs": "us", "sec": "s", "msec": "ms", "usec": "us", "nsec": "ns"}
_ALLOWED = (
    (set(CORPUS_SCHEMA.names) - set(PROVENANCE) - {"latency_us"}) | set(TIME_COLUMNS) | {"latency", "latency_unit"}
)


def import_files(
    db: str | Path, paths: list[str | Path], *, source: str | None = None, rejects: str | Path | None = None
) -> IngestReport:
    """Import measurement files (``.csv``, ``.parquet``) into the corpus of store ``db``."""
    staged = [_read(Path(p)) for p in paths]  # every file is read and its header checked first
    with CorpusWriter(db, rejects) as writer:
        for path, text_table, row_label in staged:
            src = Source(
                key=f"file:{path.name}" if source is None else f"file:{source}",
                name=source or "file",
                content_sha256=file_sha256(path),
                origin="file",
                location=str(path),
                scope="file",  # the rows say everything: the same bytes under any name are one source
                row_label=row_label,
            )
            if writer.new_sources([src]):
                writer.ingest([src], _stage_sql(writer, text_table, src))
    return writer.report


def _read(path: Path) -> tuple[Path, pa.Table, str]:
    """(path, all-text table with __loc and __issues, 'line' | 'row') after header checks."""
    if not path.is_file():
        raise CorpusError(issues=[Issue("no such file", file=str(path))])
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, columns, locs, issues = _read_csv(path)
        row_label = "line"
    elif suffix == ".parquet":
        header, columns, locs, issues = _read_parquet(path)
        row_label = "row"
    else:
        raise CorpusError(issues=[Issue("a measurement file is .csv or .parquet", file=str(path), got=path.suffix)])
    _check_header(header, path)
    table = pa.table(
        {
            **{name: pa.array(columns[name], pa.string()) for name in header},
            "__loc": pa.array(locs, pa.int64()),
            "__issues": pa.array(
                issues,
                pa.list_(pa.struct([("field", pa.string()), ("reason", pa.string()), ("value", pa.string())])),
            ),
        }
    )
    return path, table, row_label


def _read_csv(path: Path):
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(issues=[Issue(f"cannot read the file: {exc}", file=str(path))]) from None
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise CorpusError(issues=[Issue("the file is empty", file=str(path), line=1)]) from None
    except csv.Error as exc:
        raise CorpusError(issues=[Issue(f"not a CSV header: {exc}", file=str(path), line=1)]) from None
    columns: dict[str, list] = {h: [] for h in header}
    locs, issues = [], []
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise CorpusError(issues=[Issue(f"malformed CSV: {exc}", file=str(path), line=reader.line_num)]) from None
        if not any(f.strip() for f in fields):
            continue
        row_issues = []
        if len(fields) != len(header):
            missing = header[len(fields) :] if len(fields) < len(header) else []
            row_issues.append(
                {
                    "field": ", ".join(missing) or None,
                    "reason": f"the row has {len(fields)} fields, the header {len(header)}"
                    + (f": no value for {', '.join(missing)}" if missing else ""),
                    "value": None,
                }
            )
        for i, name in enumerate(header):
            value = fields[i].strip() if i < len(fields) else None
            columns[name].append(value or None)
        locs.append(reader.line_num)
        issues.append(row_issues or None)
    return header, columns, locs, issues


def _read_parquet(path: Path):
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorpusError(issues=[Issue(f"cannot read the Parquet file: {exc}", file=str(path))]) from None
    header = table.column_names
    columns = {}
    for name in header:
        col = table.column(name)
        if pa.types.is_floating(col.type):
            values = [None if v is None else repr(float(v)) for v in col.to_pylist()]
        else:
            values = [None if v is None else str(v) for v in col.to_pylist()]
        columns[name] = values
    return header, columns, list(range(table.num_rows)), [None] * table.num_rows


def _check_header(header: list[str], path: Path) -> None:
    issues = []
    seen: set[str] = set()
    for col, name in enumerate(header, start=1):
        if name in seen:
            issues.append(Issue(f"column '{name}' appears twice", file=str(path), line=1, column=col))
        seen.add(name)
        if name in PROVENANCE:
            issues.append(
                Issue(f"column '{name}' is set by the importer", file=str(path), line=1, column=col, hint="drop it")
            )
        elif name not in _ALLOWED:
            hint = did_you_mean(name, _ALLOWED) or "columns are kernel_corpus columns plus one latency column"
            issues.append(Issue(f"unknown column '{name}'", file=str(path), line=1, column=col, hint=hint))
    times = [c for c in header if c in TIME_COLUMNS or c == "latency"]
    if not times:
        issues.append(
            Issue(
                "no time column",
                file=str(path),
                line=1,
                hint="add latency_us (or latency_ms, latency_s, latency_ns), or latency with a latency_unit column",
            )
        )
    elif len(times) > 1:
        issues.append(Issue(f"more than one time column: {', '.join(times)}", file=str(path), line=1))
    elif times == ["latency"] and "latency_unit" not in header:
        issues.append(Issue("latency needs a latency_unit column (s, ms, us or ns)", file=str(path), line=1))
    elif "latency_unit" in header and times != ["latency"]:
        issues.append(Issue(f"latency_unit goes with a plain latency column, not {times[0]}", file=str(path), line=1))
    for name in ("op_kind", "gpu", "library"):
        if name not in header:
            issues.append(Issue(f"missing column '{name}'", file=str(path), line=1, hint="every row needs it"))
    if issues:
        raise CorpusError(f"{path}: cannot import this file", issues)


def _stage_sql(writer: CorpusWriter, text: pa.Table, src: Source) -> str:
    """A SQL query over the text table typing every column; a value that does not parse is
    null with an issue naming its column."""
    con = writer.con
    con.register("__archsql_text", text)
    con.execute("create or replace temp table __t as select * from __archsql_text")
    con.unregister("__archsql_text")
    header = set(text.column_names)
    select, problems = [], []
    for field in CORPUS_SCHEMA:
        name = field.name
        if name == "source":
            select.append(f"'{_q(src.name)}' as source")
        elif name == "source_key":
            select.append(f"'{_q(src.key)}' as source_key")
        elif name == "source_hash":
            select.append(f"'{src.hash}' as source_hash")
        elif name == "source_row":
            select.append("__loc as source_row")
        elif name == "latency_us":
            expr, issue = _time(header)
            select.append(f"{expr} as latency_us")
            problems += issue
        elif name not in header:
            select.append(f"null::{sql_type(field.type)} as {name}")
        else:
            expr, issue = _typed(name, field.type)
            select.append(f"{expr} as {name}")
            if issue:
                problems.append(issue)
    note = _note(header)
    issues = ", ".join(problems)
    return f"""
        select {", ".join(select)},
            coalesce(__issues, []::{ISSUE_TYPE}) || list_filter([{issues}]::{ISSUE_TYPE}, lambda x: x is not null)
                as __issues,
            {note} as __note
        from __t
    """


def _typed(name: str, t: pa.DataType) -> tuple[str, str | None]:
    raw = f'"{name}"'
    if pa.types.is_string(t):
        return raw, None
    if pa.types.is_integer(t):
        d = f"try_cast({raw} as double)"
        expr = f"case when {d} = trunc({d}) and abs({d}) < 9e15 then {d}::bigint end"
        return expr, _issue(name, f"{raw} is not null and ({expr}) is null", "'not an integer'")
    if pa.types.is_floating(t):
        expr = f"try_cast({raw} as double)"
        return expr, _issue(name, f"{raw} is not null and {expr} is null", "'not a number'")
    if pa.types.is_boolean(t):
        expr = f"try_cast({raw} as boolean)"
        return expr, _issue(name, f"{raw} is not null and {expr} is null", "'not true or false'")
    raise AssertionError(f"no text conversion for {t}")


def _time(header: set[str]) -> tuple[str, list[str]]:
    (column,) = [c for c in header if c in TIME_COLUMNS or c == "latency"]
    value = f'try_cast("{column}" as double)'
    problems = [_issue(column, f'"{column}" is not null and {value} is null', "'not a number'")]
    if column != "latency":
        return f"{value} * {TIME_UNITS[TIME_COLUMNS[column]]}", problems
    unit = _unit_expr()
    factor = "case " + " ".join(f"when {unit} = '{u}' then {f}" for u, f in TIME_UNITS.items()) + " end"
    problems.append(
        _issue(
            "latency_unit",
            f"({factor}) is null",
            f"'unknown time unit (expected {', '.join(TIME_UNITS)})'",
            value_expr='"latency_unit"',
        )
    )
    return f"{value} * ({factor})", problems


def _unit_expr() -> str:
    unit = 'lower(trim("latency_unit"))'
    aliases = " ".join(f"when '{a}' then '{u}'" for a, u in UNIT_ALIASES.items())
    return f"(case {unit} {aliases} else {unit} end)"


def _note(header: set[str]) -> str:
    if "latency" in header:
        return "'the row gives latency in ' || coalesce(\"latency_unit\", '?')"
    (column,) = [c for c in header if c in TIME_COLUMNS]
    return f"'the file gives {column}'"


def _issue(column: str, condition: str, reason: str, value_expr: str | None = None) -> str:
    value = value_expr or f'"{column}"'
    return f"case when {condition} then {{'field': '{column}', 'reason': {reason}, 'value': {value}}} end"


def _q(text: str) -> str:
    return text.replace("'", "''")
