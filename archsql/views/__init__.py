"""SQL views over the store: one plain-SQL file per view, in layers base → int → reports.

Each ``<layer>/<name>.sql`` defines the view ``<name>``; its sidecar ``<name>.yml``
documents the view (description, every column with unit) and lists invariants: queries
that return zero rows when the invariant holds.  ``create_views`` orders the files by the
tables they reference, checks each with sqlglot against the live schema (so an unknown
table or column is reported as ``file:line:col``) and then creates it in DuckDB.

Before the views, ``create_views`` creates the SQL macros of ``macros/NN_<name>.sql``, in
file-name order (the numeric prefix orders a macro after the macros it calls).  Each file
holds one ``create or replace macro <name>(...) as ...`` statement, plain DuckDB SQL, whose
name must be the file stem without its prefix.  The macros are the SQL side of the named
factors of ``archsql.evaluator.factors`` (tested against it); they live in the database,
so every DuckDB client sees them with the views.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from archsql.errors import Issue, QueryError, SpecError, did_you_mean

if TYPE_CHECKING:  # sqlglot loads when views are created or ordered, not when a store is read
    from sqlglot import exp

VIEWS_DIR = Path(__file__).parent
LAYERS = ("base", "int", "reports")
MACROS = "macros"
DIALECT = "duckdb"


@dataclass(frozen=True)
class ViewFile:
    name: str
    layer: str
    path: Path
    sql: str


def view_files(views_dir: str | Path | None = None) -> list[ViewFile]:
    """Every ``<layer>/<name>.sql`` under ``views_dir``, in layer then name order."""
    root = Path(views_dir) if views_dir is not None else VIEWS_DIR
    files: dict[str, ViewFile] = {}
    for layer in LAYERS:
        for path in sorted((root / layer).glob("*.sql")):
            name = path.stem.lower()
            if name in files:
                raise QueryError(issues=[Issue(f"view '{name}' is also defined in {files[name].path}", file=str(path))])
            files[name] = ViewFile(name, layer, path, path.read_text(encoding="utf-8"))
    return list(files.values())


@dataclass(frozen=True)
class MacroFile:
    name: str
    path: Path
    sql: str


_MACRO_FILE = re.compile(r"^(\d+)_(\w+)$")
_MACRO_HEAD = re.compile(r"\A(?:\s|--[^\n]*\n)*create\s+or\s+replace\s+macro\s+(\w+)\s*\(", re.IGNORECASE)


def macro_files(views_dir: str | Path | None = None) -> list[MacroFile]:
    """Every ``macros/NN_<name>.sql`` under ``views_dir``, in file-name (creation) order."""
    root = Path(views_dir) if views_dir is not None else VIEWS_DIR
    out: list[MacroFile] = []
    issues: list[Issue] = []
    seen: dict[str, Path] = {}
    for path in sorted((root / MACROS).glob("*.sql")):
        sql = path.read_text(encoding="utf-8")
        stem = _MACRO_FILE.match(path.stem)
        head = _MACRO_HEAD.match(sql)
        if stem is None:
            issues.append(
                Issue(
                    "a macro file is named NN_<macro name>.sql (NN orders creation)",
                    file=str(path),
                    got=path.name,
                    hint=f"rename it, e.g. 10_{path.stem}.sql",
                )
            )
        elif head is None:
            issues.append(
                Issue(
                    "a macro file holds one `create or replace macro <name>(<params>) as <expression>` statement",
                    file=str(path),
                    line=1,
                )
            )
        elif head.group(1).lower() != stem.group(2).lower():
            line = sql.count("\n", 0, head.start(1)) + 1
            issues.append(
                Issue(
                    f"the file defines macro '{head.group(1)}' but is named for '{stem.group(2)}'",
                    file=str(path),
                    line=line,
                    column=head.start(1) - (sql.rfind("\n", 0, head.start(1)) + 1) + 1,
                    hint=f"name the file NN_{head.group(1)}.sql or the macro {stem.group(2)}",
                )
            )
        else:
            name = stem.group(2).lower()
            if name in seen:
                issues.append(Issue(f"macro '{name}' is also defined in {seen[name]}", file=str(path)))
            seen[name] = path
            out.append(MacroFile(name, path, sql))
    if issues:
        raise QueryError(issues=issues)
    return out


def create_macros(con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None) -> list[str]:
    """(Re)create every SQL macro in file-name order; returns the macro names in that order.
    DuckDB binds a macro when it is created, so an unknown function or a syntax error is
    reported here with the file, line and (where DuckDB shows it) column."""
    names = []
    sources: dict[str, str] = {}
    for f in macro_files(views_dir):
        body = _macro_body(f)
        try:
            if len(con.extract_statements(body)) != 1:
                raise QueryError(
                    issues=[Issue("a macro file holds exactly one statement (its create macro)", file=str(f.path))]
                )
            con.execute(body)
        except duckdb.Error as exc:
            line, column = _duckdb_position(str(exc), body)
            before_excerpt = re.split(r"\n\s*LINE \d+:", str(exc))[0]
            message = " ".join(part.strip() for part in before_excerpt.splitlines() if part.strip())
            raise QueryError(
                issues=[Issue(f"DuckDB rejected the macro: {message}", file=str(f.path), line=line, column=column)]
            ) from None
        names.append(f.name)
        sources[f.name] = body
    record_sources(con, "macro", sources)
    return names


def create_views(con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None) -> list[str]:
    """(Re)create the macros, then every view in dependency order; returns the view names
    in that order."""
    create_macros(con, views_dir)
    files = {f.name: f for f in view_files(views_dir)}
    schema = _live_schema(con)
    tables = {t for t, kind in _relations(con).items() if kind == "BASE TABLE"}
    clash = sorted(tables & set(files))
    if clash:
        raise QueryError(
            issues=[Issue(f"view name '{n}' is already a table of the store", file=str(files[n].path)) for n in clash]
        )
    trees = {name: _parse(f) for name, f in files.items()}
    order = _order(files, set(schema))
    for name in order:
        f = files[name]
        _validate(f, trees[name], schema)
        body = f.sql.rstrip().removesuffix(";")  # keep leading lines: line numbers match
        try:
            con.execute(f'create or replace view "{name}" as\n{body}')
        except duckdb.Error as exc:
            line = _DUCKDB_LINE.search(str(exc))  # LINE n of the statement = line n-1 of the file
            raise QueryError(
                issues=[
                    Issue(
                        f"DuckDB rejected the view: {exc}",
                        file=str(f.path),
                        line=int(line.group(1)) - 1 if line else None,
                    )
                ]
            ) from None
        schema[name] = _live_schema(con, name)[name]
    record_sources(con, "view", {name: files[name].sql for name in order})
    return order


# The store's derived tables (archsql.store) live in this schema, with ``sources``: the md5
# of each view's and macro's SQL as created here, so the derived tables' fingerprint sees a
# view or macro recreated with other SQL (DuckDB's own catalog text is re-rendered on load).
DERIVED_SCHEMA = "derived"
SOURCES_TABLE = "sources"


def _macro_body(f: MacroFile) -> str:
    return f.sql.rstrip().removesuffix(";")  # the statement run (and recorded) for a macro file


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def sources_current(
    con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None, *, kinds: tuple[str, ...] = ("macro", "view")
) -> bool:
    """Whether the store holds the macros and/or views of ``views_dir`` as they would be created
    from its files now: the md5 :func:`record_sources` recorded for each equals its file's, and
    each view exists (then creating them again would change nothing)."""
    want = {}
    if "macro" in kinds:
        want |= {("macro", f.name): _md5(_macro_body(f)) for f in macro_files(views_dir)}
    if "view" in kinds:
        want |= {("view", f.name): _md5(f.sql) for f in view_files(views_dir)}
    db = '"' + con.execute("select current_database()").fetchall()[0][0].replace('"', '""') + '"'
    try:
        rows = con.execute(f"select kind, name, sql_md5 from {db}.{DERIVED_SCHEMA}.{SOURCES_TABLE}").fetchall()
    except duckdb.CatalogException:
        return False
    have = {(k, n): m for k, n, m in rows}
    views = {
        name
        for (name,) in con.execute(
            "select view_name from duckdb_views() where database_name = current_database() and schema_name = 'main'"
        ).fetchall()
    }
    return all(have.get(key) == m for key, m in want.items()) and all(n in views for k, n in want if k == "view")


def record_sources(con: duckdb.DuckDBPyConnection, kind: str, sql: dict[str, str]) -> None:
    """Record the md5 of the SQL each view (``kind`` 'view') or macro was created from."""
    db = '"' + con.execute("select current_database()").fetchall()[0][0].replace('"', '""') + '"'
    table = f"{db}.{DERIVED_SCHEMA}.{SOURCES_TABLE}"
    con.execute(f"create schema if not exists {db}.{DERIVED_SCHEMA}")
    con.execute(f"create table if not exists {table} (kind varchar, name varchar, sql_md5 varchar)")
    rows = [(kind, name, _md5(text)) for name, text in sql.items()]
    con.execute(f"delete from {table} where kind = ? and name in (select unnest(?::varchar[]))", [kind, list(sql)])
    if rows:
        con.executemany(f"insert into {table} values (?, ?, ?)", rows)


def view_docs(views_dir: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The parsed sidecar YAML of every view, keyed by view name (shape-checked).  The docs are
    the ones parsed once per version of each file (:func:`_read_doc`), shared by every caller:
    read them, never change them (a copy of all of them on each call cost a test file
    two minutes of CPU)."""
    docs: dict[str, dict[str, Any]] = {}
    issues: list[Issue] = []
    for f in view_files(views_dir):
        side = f.path.with_suffix(".yml")
        if not side.is_file():
            issues.append(Issue(f"view '{f.name}' has no sidecar {side.name}", file=str(f.path)))
            continue
        stat = side.stat()
        doc, found = _read_doc(str(side), stat.st_mtime_ns, stat.st_size)
        issues += found
        docs[f.name] = doc  # the parsed one, shared: read it, never change it
    if issues:
        raise SpecError(issues=issues)
    return docs


def unstored_views(views_dir: str | Path | None = None) -> set[str]:
    """The views whose sidecar says ``stored: false``: their rows are never kept in the
    store's derived tables (archsql.store.refresh), being too many to keep (the per-device
    shapes, 4.5 M rows on the catalog) for what computing them costs."""
    from archsql.schema.yamlsrc import load_yaml

    out = set()
    for f in view_files(views_dir):
        side = f.path.with_suffix(".yml")
        if side.is_file() and "stored:" in side.read_text(encoding="utf-8"):  # (parse only those)
            doc = load_yaml(side)
            if isinstance(doc, dict) and doc.get("stored") is False:
                out.add(f.name)
    return out


@functools.lru_cache(maxsize=1024)
def _read_doc(file: str, mtime_ns: int, size: int) -> tuple[Any, list[Issue]]:
    """A sidecar parsed and shape-checked, once per version of the file (its modification
    time and size): parsing ~100 sidecars costs half a second, and check_invariants, export
    and the tests read them all."""
    from archsql.schema.yamlsrc import load_yaml

    doc = load_yaml(file)
    return doc, _check_doc(doc, file)


def check_invariants(
    con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None, *, materialize: bool = True
) -> list[tuple[str, str, int]]:
    """Run every invariant; return ``(view, invariant, violating rows)`` for those that fail.
    With ``materialize`` (the default) each view is computed once (:func:`computed_once`)."""
    docs = view_docs(views_dir)
    with computed_once(con, views_dir) if materialize else contextlib.nullcontext():
        failures = []
        for view, doc in docs.items():
            for inv in doc["invariants"]:
                n = con.execute(f"select count(*) from ({inv['sql']})").fetchone()[0]
                if n:
                    failures.append((view, inv["name"], n))
        return failures


@contextlib.contextmanager
def computed_once(
    con: duckdb.DuckDBPyConnection,
    views_dir: str | Path | None = None,
    *,
    views: Iterable[str] | None = None,
    order: Iterable[str] | None = None,
    keep: bool = False,
) -> Iterator[list[str]]:
    """While open, every view of ``views_dir`` on ``con`` (or only ``views`` and the views
    they read) reads as the rows it gives, computed
    once: in dependency order each view is copied into a temporary table of the same name,
    which shadows the view for the views after it and for every query on this connection
    (DuckDB looks in the temp schema first), so reading many views does not evaluate their
    shared chains again.  A view the connection already shadows (the store's derived tables,
    :func:`archsql.store.connect`) is read as it is.  ``order``: the views to compute,
    already in dependency order (the store's recorded graph,
    :func:`archsql.store.view_graph_of`), instead of parsing the view files.  Yields the view
    names in that order; the tables it made are dropped on exit (``keep``: left for the
    caller, who closes the connection next: closing drops them all at once, ~25 ms less
    than 55 drops).  Only for reading: a parameter-table change while open is not seen by the
    shadowed views.
    """
    shadows: list[str] = []
    order = list(order) if order is not None else [f.name for f in ordered_views(con, views_dir, views)]
    try:
        already = _temp_relations(con)  # shadowed already (the store's derived rows): computed
        for name in order:
            if name not in already:
                con.execute(f'create temp table "{name}" as select * from main."{name}"')
                shadows.append(name)
        yield order
    finally:
        for name in [] if keep else reversed(shadows):
            con.execute(f'drop table if exists temp.main."{name}"')


def _order_in(con: duckdb.DuckDBPyConnection, views_dir: str | Path | None) -> list[str]:
    """The views of ``views_dir`` that exist on ``con``, in dependency order."""
    return [f.name for f in ordered_views(con, views_dir)]


def ordered_views(
    con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None, needed: Iterable[str] | None = None
) -> list[ViewFile]:
    """The view files of ``views_dir`` whose view exists on ``con`` (with ``needed``: only
    those views and every view they read), in dependency order (a view after every view it
    reads)."""
    files, deps = view_graph(con, views_dir)
    if needed is not None:
        wanted: set[str] = set()
        stack = [n.lower() for n in needed if n.lower() in files]
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack.extend(deps[name])
        deps = {n: d for n, d in deps.items() if n in wanted}
    return [files[name] for name in _topological(files, deps)]


def view_graph(
    con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None
) -> tuple[dict[str, ViewFile], dict[str, set[str]]]:
    """The view files of ``views_dir`` whose view exists on ``con``, by name, and the views
    each of them reads."""
    relations = _relations(con)
    files = {f.name: f for f in view_files(views_dir) if relations.get(f.name) == "VIEW"}
    known = set(relations) | set(files)
    return files, {name: dependencies(f, known, files) for name, f in files.items()}


def relations_read(con: duckdb.DuckDBPyConnection, sql: str) -> set[str] | None:
    """The names a query reads as tables or views (CTE names and other ``table_name`` values
    of its syntax tree too: a superset), by DuckDB's own parser (``json_serialize_sql``: no
    sqlglot); None when DuckDB cannot serialize it (what it reads is then unknown)."""
    import json

    (text,) = con.execute("select json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(text)
    if tree.get("error"):
        return None
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("table_name"), str) and node["table_name"]:
                found.add(node["table_name"].lower())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def view_reads(con: duckdb.DuckDBPyConnection, views_dir: str | Path | None = None) -> dict[str, set[str]]:
    """The store tables each view of ``views_dir`` reads, directly or through the views it
    reads (CTE names excluded): what its rows are computed from."""
    files, deps = view_graph(con, views_dir)
    tables = {name for name, kind in _relations(con).items() if kind == "BASE TABLE"}
    direct: dict[str, set[str]] = {}
    for name, f in files.items():
        refs = _refs(f)
        direct[name] = {t for t, _ in refs.tables if t in tables and t not in refs.ctes}
    out: dict[str, set[str]] = {}
    for name in _topological(files, deps):  # a view after the views it reads
        out[name] = direct[name].union(*(out[d] for d in deps[name]))
    return out


def _temp_relations(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Names of the connection's temporary tables and views (which shadow the store's)."""
    rows = con.execute("select table_name from information_schema.tables where table_catalog = 'temp'").fetchall()
    return {r[0].lower() for r in rows}


def _order(files: dict[str, ViewFile], relations: set[str]) -> list[str]:
    known = relations | set(files)
    deps = {name: dependencies(files[name], known, files) for name in files}
    return _topological(files, deps)


# -- parsing and dependency order ----------------------------------------------------------


_PARSED: dict[str, exp.Expression] = {}  # view SQL → its parsed query (callers never mutate it)


def _parse(f: ViewFile) -> exp.Expression:
    if f.sql not in _PARSED:
        _PARSED[f.sql] = _parse_file(f)
    return _PARSED[f.sql]


def _parse_file(f: ViewFile) -> exp.Expression:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        trees = [t for t in sqlglot.parse(f.sql, dialect=DIALECT) if t is not None]
    except ParseError as exc:
        raise QueryError(
            issues=[
                Issue(e["description"], file=str(f.path), line=e.get("line"), column=e.get("col")) for e in exc.errors
            ]
            or [Issue(str(exc), file=str(f.path))]
        ) from None
    except TokenError as exc:
        raise QueryError(issues=[Issue(str(exc), file=str(f.path))]) from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise QueryError(issues=[Issue("a view file must hold exactly one SELECT query", file=str(f.path))])
    return trees[0]


@dataclass(frozen=True)
class _Refs:
    """What a view's query reads, by name: every table reference (lower-cased name, whether
    it is qualified) in the order of the syntax tree, and the names of its CTEs."""

    tables: tuple[tuple[str, bool], ...]
    ctes: frozenset[str]

    def reads(self) -> Iterator[tuple[int, str]]:
        """(position among the references, name) of each one read as a table or view (an
        unqualified name a CTE defines is the CTE)."""
        return (
            (i, name)
            for i, (name, qualified) in enumerate(self.tables)
            if name and (qualified or name not in self.ctes)
        )


_REFS: dict[str, _Refs] = {}  # view SQL → what it reads (walking the tree costs more than the rest)


def _refs(f: ViewFile) -> _Refs:
    if f.sql not in _REFS:
        from sqlglot import exp

        tree = _parse(f)
        _REFS[f.sql] = _Refs(
            tuple((t.name.lower(), bool(t.db)) for t in tree.find_all(exp.Table)),
            frozenset(cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)),
        )
    return _REFS[f.sql]


def dependencies(f: ViewFile, known: set[str], files) -> set[str]:
    """The views of ``files`` that ``f`` reads; a name neither ``known`` nor a file, or a view
    of a later layer, is a located :class:`QueryError` (the file's parse is cached)."""
    deps: set[str] = set()
    issues = []
    for i, name in _refs(f).reads():
        if name not in known:
            from sqlglot import exp

            table = list(_parse(f).find_all(exp.Table))[i]
            line, col = _position(f.sql, table.this)
            issues.append(
                Issue(
                    f"unknown table or view '{table.name}'",
                    file=str(f.path),
                    line=line,
                    column=col,
                    hint=did_you_mean(name, known),
                )
            )
        elif name in files:
            later = LAYERS.index(files[name].layer) > LAYERS.index(f.layer)
            if later:
                issues.append(
                    Issue(
                        f"a {f.layer} view may not read the {files[name].layer} view '{name}'",
                        file=str(f.path),
                    )
                )
            deps.add(name)
    if issues:
        raise QueryError(issues=issues)
    return deps


def _topological(files: dict[str, ViewFile], deps: dict[str, set[str]]) -> list[str]:
    def key(n: str) -> tuple[int, str]:
        return LAYERS.index(files[n].layer), n

    waiting = {n: set(d) for n, d in deps.items()}
    order: list[str] = []
    while waiting:
        ready = sorted((n for n, d in waiting.items() if not d), key=key)
        if not ready:
            cycle = _find_cycle(waiting)
            raise QueryError(
                f"views depend on each other in a cycle: {' -> '.join(cycle)}",
                [Issue("part of the cycle", file=str(files[n].path)) for n in cycle[:-1]],
            )
        for n in ready:
            order.append(n)
            del waiting[n]
        for d in waiting.values():
            d.difference_update(ready)
    return order


def _find_cycle(waiting: dict[str, set[str]]) -> list[str]:
    path: list[str] = []
    node = min(waiting)
    while node not in path:
        path.append(node)
        node = min(waiting[node])
    return [*path[path.index(node) :], node]


# -- validation against the live schema ----------------------------------------------------


def _relations(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    rows = con.execute(
        "select table_name, table_type from information_schema.tables "
        "where table_catalog = current_database() and table_schema = 'main'"
    ).fetchall()
    return {name.lower(): kind for name, kind in rows}


def _live_schema(con: duckdb.DuckDBPyConnection, only: str | None = None) -> dict[str, dict[str, str]]:
    sql = (
        "select table_name, column_name, data_type from information_schema.columns "
        "where table_catalog = current_database() and table_schema = 'main'"
    )
    params: list[str] = []
    if only is not None:
        sql += " and lower(table_name) = ?"
        params.append(only)
    schema: dict[str, dict[str, str]] = {}
    for table, column, dtype in con.execute(sql + " order by table_name, ordinal_position", params).fetchall():
        schema.setdefault(table.lower(), {})[column] = _sqlglot_type(dtype)
    return schema


@functools.cache  # a store has a few dozen distinct types over thousands of columns
def _sqlglot_type(dtype: str) -> str:
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        exp.DataType.build(dtype, dialect=DIALECT)
    except (ParseError, ValueError):
        return "UNKNOWN"
    return dtype


_COLUMN_IN_MESSAGE = re.compile(r"[Cc]olumn:? '?([^'\s.,]+)'?")
_LINE_COL = re.compile(r"Line: (\d+), Col: (\d+)")
_DUCKDB_LINE = re.compile(r"LINE (\d+):")
_DUCKDB_CARET = re.compile(r"^(LINE (\d+): )(.*)\n( *)\^", re.MULTILINE)


def _duckdb_position(message: str, sql: str) -> tuple[int | None, int | None]:
    """(line, column) of a DuckDB error in ``sql``; the column only where DuckDB shows the
    whole line (it elides long lines) and marks the spot with a caret."""
    caret = _DUCKDB_CARET.search(message)
    if caret is None:
        line = _DUCKDB_LINE.search(message)
        return (int(line.group(1)), None) if line else (None, None)
    line = int(caret.group(2))
    lines = sql.split("\n")
    shown = caret.group(3)
    if 0 < line <= len(lines) and lines[line - 1].rstrip() == shown.rstrip():
        return line, len(caret.group(4)) - len(caret.group(1)) + 1
    return line, None


# View SQL checked against the columns of the relations it reads: a view file and the same
# schemas check the same way, so a process that builds many stores checks each pair once.
_VALIDATED: set[tuple] = set()


def _validate(f: ViewFile, tree: exp.Expression, schema: dict[str, dict[str, str]]) -> None:
    from sqlglot import exp
    from sqlglot.errors import OptimizeError
    from sqlglot.optimizer.qualify import qualify

    names = {t.name.lower() for t in tree.find_all(exp.Table)}
    key = (f.sql, tuple(sorted((n, tuple(schema[n].items())) for n in names if n in schema)))
    if key in _VALIDATED:
        return
    try:
        qualify(tree.copy(), schema=schema, dialect=DIALECT, validate_qualify_columns=True)
        _VALIDATED.add(key)
    except OptimizeError as exc:
        message = _LINE_COL.sub("", str(exc)).split("\n")[0].rstrip(" .()")
        line = col = hint = None
        match = _COLUMN_IN_MESSAGE.search(str(exc))
        if match:
            node = _find_column(tree, match.group(1), _LINE_COL.search(str(exc)))
            if node is not None:
                line, col = _position(f.sql, node.this)
                hint = _column_hint(node, match.group(1), tree, schema)
        raise QueryError(issues=[Issue(message, file=str(f.path), line=line, column=col, hint=hint)]) from None


def _find_column(tree: exp.Expression, name: str, line_col: re.Match | None):
    from sqlglot import exp

    candidates = [c for c in tree.find_all(exp.Column) if c.name.lower() == name.lower()]
    if line_col:
        line, col = int(line_col.group(1)), int(line_col.group(2))
        exact = [c for c in candidates if (c.this.meta.get("line"), c.this.meta.get("col")) == (line, col)]
        candidates = exact or candidates
    return min(candidates, key=lambda c: c.this.meta.get("start", 0), default=None)


def _column_hint(node: exp.Column, name: str, tree: exp.Expression, schema) -> str | None:
    """Suggest a close column name among the tables and CTEs the query reads."""
    from sqlglot import exp

    choices: set[str] = set()
    for table in tree.find_all(exp.Table):
        choices |= set(schema.get(table.name.lower(), {}))
    for cte in tree.find_all(exp.CTE):
        choices |= set(cte.this.named_selects)
    if name.lower() not in {c.lower() for c in choices}:
        return did_you_mean(name, choices)
    if node.table:
        return f"check that '{node.table}' names a table, alias or CTE here that has '{name}'"
    return f"'{name}' may be in more than one table read here; qualify it (alias.{name})"


def _position(text: str, node: exp.Expression) -> tuple[int | None, int | None]:
    from sqlglot import exp

    start = node.meta.get("start") if isinstance(node, exp.Expression) else None
    if start is None:
        return None, None
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


# -- sidecar documents ---------------------------------------------------------------------

_DOC_KEYS = {"description", "columns", "invariants"}
_DOC_OPTIONAL_KEYS = {"stored"}  # false: the view's rows are not kept in the derived tables
_COLUMN_KEYS = {"name", "description", "unit"}
_INVARIANT_KEYS = {"name", "description", "sql"}


def _check_doc(doc: Any, file: str) -> list[Issue]:
    if not isinstance(doc, dict):
        return [
            Issue(
                "a view sidecar must be a mapping",
                file=file,
                expected="mapping",
                got=type(doc).__name__,
            )
        ]
    issues = _check_keys(doc, _DOC_KEYS, file, "$", optional=_DOC_OPTIONAL_KEYS)
    if not isinstance(doc.get("description"), str):
        issues.append(Issue("description must be text", file=file, path="$.description"))
    if "stored" in doc and not isinstance(doc["stored"], bool):
        issues.append(Issue("stored must be true or false", file=file, path="$.stored", got=repr(doc["stored"])))
    for section, keys in (("columns", _COLUMN_KEYS), ("invariants", _INVARIANT_KEYS)):
        items = doc.get(section)
        if not isinstance(items, list):
            issues.append(Issue(f"{section} must be a list", file=file, path=f"$.{section}"))
            continue
        for i, item in enumerate(items):
            where = f"$.{section}[{i}]"
            if not isinstance(item, dict):
                issues.append(Issue("expected a mapping", file=file, path=where))
                continue
            issues += _check_keys(item, keys, file, where)
            for key in keys - {"unit"}:
                if not isinstance(item.get(key), str) or not item[key].strip():
                    issues.append(Issue(f"{key} must be non-empty text", file=file, path=f"{where}.{key}"))
    return issues


def _check_keys(item: dict, keys: set[str], file: str, where: str, *, optional: set[str] = frozenset()) -> list[Issue]:
    line, col = getattr(item, "line", None), getattr(item, "column", None)
    known = keys | optional
    out = [
        Issue(
            f"unknown key '{k}'",
            file=file,
            line=line,
            column=col,
            path=where,
            hint=did_you_mean(k, known),
        )
        for k in item
        if k not in known
    ]
    out += [Issue(f"missing key '{k}'", file=file, line=line, column=col, path=where) for k in sorted(keys - set(item))]
    return out
