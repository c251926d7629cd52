"""Render the site: run each page's queries once, write pages, data files, SQL pages and assets."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from archsql import queries
from archsql.errors import Issue, QueryError, StoreError, did_you_mean
from archsql.output import human, human_bytes, human_seconds
from archsql.site.pages import PAGES, VIEW_ORDER, Column, Figure, Page

HERE = Path(__file__).parent
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
FORMATS = {"human": human, "bytes": human_bytes, "seconds": human_seconds}


@dataclass(frozen=True)
class SiteReport:
    out: Path
    models: tuple[str, ...]
    pages: int
    files: int
    bytes: int
    seconds: float


def slug(name: str) -> str:
    """A file name for a model: its name, or (a name with other characters) the name with
    them as '_' plus a short hash of the name, so two names never share a file."""
    safe = _SLUG.sub("_", name).lstrip(".") or "_"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def build_site(
    db: str | Path, out: str | Path, models: Sequence[str] | None = None, design_db: str | Path | None = None
) -> SiteReport:
    """Write the site of the store ``db`` (every model, or ``models``) into the folder ``out``;
    the design playground reads the design store ``design_db`` (``archsql compare``) when given."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    t0 = time.perf_counter()
    db, out = Path(db), Path(out)
    if not db.is_file():
        raise StoreError(f"no store at {db}", [Issue("build one first: archsql build [MODELS] (or give --db PATH)")])
    if design_db is not None and not Path(design_db).is_file():
        raise StoreError(
            f"no design store at {design_db}", [Issue("write one first: archsql compare SLOT -C … --store PATH")]
        )
    _check_out(out)
    results = _run_sources(db, "main")
    known = results["site_gallery"].column("model").to_pylist()
    chosen = _choose(models, known)
    results = {name: _only(table, chosen) for name, table in results.items()}
    if design_db is not None:
        _check_design_store(Path(design_db))
        results |= _run_sources(Path(design_db), "design")
    else:
        results |= _empty_sources("design")
    by_model = {name: _by_model(table) for name, table in results.items()}

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["show"] = show
    env.filters["value"] = data_value
    env.filters["slug"] = slug
    _prepare(out)
    _write_assets(out)
    _write_sql_pages(env, out)

    pages = 0
    for page in PAGES:  # the site-wide pages, then each model's
        if not page.per_model:
            pages += _page(env, out, page, None, by_model, chosen)
    for model in chosen:
        for page in PAGES:
            if page.per_model:
                pages += _page(env, out, page, model, by_model, chosen)
    files = [p for p in out.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return SiteReport(out, tuple(chosen), pages, len(files), size, time.perf_counter() - t0)


MARKER = ".archsql-site"  # marks a folder this command wrote: only such a folder is emptied
FOLDERS = ("data", "sql", "model", "deploy", "assets")


def _check_out(out: Path) -> None:
    """The site goes into a new folder, an empty one, or an earlier site; any other folder is
    refused rather than written into (checked before any query runs)."""
    if out.exists() and not out.is_dir():
        raise QueryError(f"--out {out} is a file", [Issue("give a folder for the site (it is created if missing)")])
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise QueryError(
            f"--out {out} is a folder that holds other files and no earlier site",
            [Issue("give a new or empty folder (or one an earlier `archsql site` wrote): nothing is overwritten")],
        )


def _prepare(out: Path) -> None:
    """Empty the folder :func:`_check_out` accepted: an earlier site's pages are removed, so a
    model no longer asked for leaves no stale page."""
    _check_out(out)
    if out.is_dir():
        for folder in FOLDERS:
            shutil.rmtree(out / folder, ignore_errors=True)
        (out / "index.html").unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by `archsql site`; the command empties this folder when it writes again\n")
    for folder in FOLDERS:
        (out / folder).mkdir()


# ---------------------------------------------------------------------------- queries


def _sources(store: str | None = None) -> list[str]:
    return list(
        dict.fromkeys(s for page in PAGES if store in (None, page.store) for f in page.figures for s in f.sources)
    )


def _needs(store: str) -> dict[str, str]:
    """source -> the relation it needs that only some stores hold (the kernel corpus's)."""
    return {s: f.needs for page in PAGES if page.store == store for f in page.figures if f.needs for s in f.sources}


def relations(db: Path) -> set[str]:
    """The tables and views of the store."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return {
            r[0]
            for r in con.execute(
                "select table_name from duckdb_tables() union select view_name from duckdb_views()"
            ).fetchall()
        }


def _run_sources(
    db: Path, store: str, names: Iterable[str] | None = None, model: str | None = None
) -> dict[str, pa.Table]:
    """The rows of each source of the pages of ``store`` (or of ``names``); with ``model``
    only that model's rows of a saved query (its filter pushed into the query)."""
    from archsql.api import query

    out = {}
    needs = _needs(store)
    present = relations(db) if needs else set()
    if present & set(needs.values()):
        import archsql.kernel_corpus  # noqa: F401  (its query hook points kernel_corpus at the store's folder)
    for name in names if names is not None else _sources(store):
        if name in needs and needs[name] not in present:  # the figure says the store has none
            out[name] = pa.table({})
        elif name in queries.saved() and model is not None:
            sql = queries.text(name).strip().rstrip(";")
            out[name] = query(f"select * from (\n{sql}\n) where model = {_literal(model)}", db=db)
        elif name in queries.saved():
            out[name] = queries.run(name, db=db)
        elif store == "design" and (path := design_query(name)) is not None:
            out[name] = query(path.read_text(encoding="utf-8"), db=db)
        else:
            try:
                order = f" order by {VIEW_ORDER[name]}" if name in VIEW_ORDER else ""
                out[name] = query(f"select * from {name}{order}", db=db)
            except QueryError as exc:
                if store != "design" or "does not exist" not in str(exc):
                    raise
                raise QueryError(
                    f"the design store {db} holds no {name}",
                    [Issue("write a comparison into it first: archsql compare SLOT -C … --store PATH")],
                ) from None
    return out


def _check_design_store(db: Path) -> None:
    """A design store holds at least one of what the design playground shows."""
    if not relations(db) & set(_needs("design").values()):
        raise QueryError(
            f"the design store {db} holds no comparison, model edit or audit card",
            [
                Issue(
                    "write one: archsql compare SLOT -C …, archsql edit MODEL … or archsql audit A B, with --store PATH"
                ),
                Issue("a comparison an earlier archsql wrote is not kept as rows (design_comparison): run it again"),
            ],
        )


def design_query(name: str) -> Path | None:
    """The saved design query ``archsql/design/sql/NAME.sql`` (run against a design store), if any."""
    from archsql.design.store import SQL_DIR

    path = SQL_DIR / f"{name}.sql"
    return path if path.is_file() else None


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _empty_sources(store: str) -> dict[str, pa.Table]:
    return {name: pa.table({}) for name in _sources(store)}


def _choose(models: Sequence[str] | None, known: list[str]) -> list[str]:
    if not models:
        return known
    chosen = list(dict.fromkeys(models))
    missing = [m for m in chosen if m not in known]
    if missing:
        issues = [Issue(f"model '{m}' is not in the store", hint=did_you_mean(m, known)) for m in missing]
        raise QueryError(
            f"{len(missing)} of the models asked for {'is' if len(missing) == 1 else 'are'} not in the store "
            "(archsql build MODEL adds one)",
            issues,
        )
    return chosen


def _only(table: pa.Table, models: Iterable[str]) -> pa.Table:
    if "model" not in table.column_names:
        return table
    return table.filter(pc.is_in(table.column("model"), pa.array(list(models), pa.string())))


def _by_model(table: pa.Table) -> dict[str | None, list[dict[str, Any]]]:
    """A query's rows (non-finite numbers as null): all under None, and each model's under its
    name without the model column (a model's page holds only its own rows)."""
    rows = _finite_columns(table).to_pylist()
    out: dict[str | None, list[dict[str, Any]]] = {None: rows}
    if "model" in table.column_names:
        for row in rows:
            out.setdefault(row["model"], []).append({k: v for k, v in row.items() if k != "model"})
    return out


def _columnar(rows: list[dict[str, Any]]) -> dict[str, list]:
    """Rows as column names and value lists (the page makes row objects again): a smaller file."""
    columns = list(rows[0]) if rows else []
    return {"columns": columns, "rows": [[r[c] for c in columns] for r in rows]}


def _finite_columns(table: pa.Table) -> pa.Table:
    """Non-finite floats as null (JSON has no NaN or infinity)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_floating(f.type):
            col = table.column(i)
            table = table.set_column(i, f, pc.if_else(pc.is_finite(col), col, pa.scalar(None, f.type)))
    return table


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


# ---------------------------------------------------------------------------- pages


def _page(env, out: Path, page: Page, model: str | None, by_model, chosen: list[str]) -> int:
    data = {s: by_model[s].get(model, []) for f in page.figures for s in f.sources}
    controls = {
        c: list(dict.fromkeys(r[c] for f in page.figures if c in f.filters for r in data[f.source] if c in r))
        for c in page.controls
    }
    specs = {f.id: _spec(f) for f in page.figures if f.chart}
    if model is None:
        name = "index.html" if page.slug == "gallery" else f"{page.slug}.html"
    else:
        name = f"{page.slug}/{slug(model)}.html"
    data_file = f"data/{page.slug}.js" if model is None else f"data/{page.slug}-{slug(model)}.js"
    root = "" if model is None else "../"
    split = _split_sources(page)
    payload = {
        "data": {name: _columnar(rows) for name, rows in data.items() if name not in split},
        "specs": specs,
        "filters": {f.id: list(f.filters) for f in page.figures},
        "sources": {f.id: list(f.sources) for f in page.figures if f.chart},
        "split": {"field": page.split, "sources": sorted(split), "files": {}} if split else None,
    }
    if split:  # one file per value of the split control, loaded when it is picked
        folder = data_file.removesuffix(".js")
        (out / folder).mkdir(exist_ok=True)
        values = dict.fromkeys(r[page.split] for name in split for r in data[name])
        for value in values:
            chunk = f"{folder}/{slug(str(value))}.js"
            rows = {name: _columnar([r for r in data[name] if r[page.split] == value]) for name in split}
            _write_js(out / chunk, "ARCHSQL.chunk(" + _json(value) + "," + _json(rows) + ");\n")
            payload["split"]["files"][value] = root + chunk
    _write_js(out / data_file, "ARCHSQL.load(" + _json(payload) + ");\n")
    html = env.get_template(f"{page.slug}.html.j2").render(
        page=page,
        pages=PAGES,
        model=model,
        models=chosen,
        root=root,
        data=data,
        data_file=data_file,
        controls=controls,
        groups=_graph_groups(data.get("site_graph", [])),
        edits=_edit_graphs(data.get("site_edit_graph", [])),
        cards=_cards(data.get("site_audit_cards", []), data.get("site_audit_evidence", [])),
    )
    (out / name).write_text(html, encoding="utf-8")
    return 1


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)


def _write_js(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _split_sources(page: Page) -> set[str]:
    """The sources whose rows go into the per-value files of ``page.split``: those of the
    figures it filters (a source another figure reads whole stays in the page's file)."""
    if not page.split:
        return set()
    split = {s for f in page.figures if page.split in f.filters for s in f.sources}
    whole = {s for f in page.figures if page.split not in f.filters for s in f.sources}
    return split - whole


@functools.cache
def _spec(figure: Figure) -> dict[str, Any]:
    """A figure's Vega-Lite spec (the same on every model's page: made once)."""
    assert figure.chart is not None
    return figure.chart(*figure.sources)


def _graph_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """site_graph rows nested stack → layer group (template) → component, in row order."""
    stacks: dict[Any, dict[Any, dict[Any, list]]] = {}
    layers: dict[tuple[Any, Any], Any] = {}
    for row in rows:
        stacks.setdefault(row["stack"], {}).setdefault(row["template"], {}).setdefault(row["component"], []).append(row)
        layers[row["stack"], row["template"]] = row["template_layers"]
    return [
        {
            "stack": stack,
            "groups": [
                {
                    "template": t,
                    "layers": layers[stack, t],
                    "components": [{"component": c, "nodes": n} for c, n in comps.items()],
                }
                for t, comps in templates.items()
            ],
        }
        for stack, templates in stacks.items()
    ]


def _edit_graphs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """site_edit_graph rows per edit, each nested like the inspector's graph (:func:`_graph_groups`),
    with the number of nodes of each diff status."""
    edits: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        edits.setdefault(row["edit"], []).append(row)
    out = []
    for edit, nodes in edits.items():
        counts = {s: sum(1 for n in nodes if n["status"] == s) for s in ("added", "changed", "removed")}
        out.append({"edit": edit, "stacks": _graph_groups(nodes), "counts": counts})
    return out


def _cards(cards: list[dict[str, Any]], evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """site_audit_cards rows, each with its rows of site_audit_evidence."""
    return [{**c, "evidence": [e for e in evidence if e["audit_id"] == c["audit_id"]]} for c in cards]


UNIT_FORMATS = {"s": "seconds"}  # a ledger row's unit -> how its values are shown (bytes units: "bytes")


def show(value: Any, column: Column | str, row: dict[str, Any] | None = None) -> str:
    fmt = column.fmt if isinstance(column, Column) else column
    if fmt == "unit":  # as the row's unit says (a ledger: parameters, bytes, FLOP, seconds)
        unit = (row or {}).get("unit") or ""
        fmt = "bytes" if "bytes" in unit else UNIT_FORMATS.get(unit, "human")
    if value is None:
        return "—"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if fmt in FORMATS and isinstance(value, int | float) and not isinstance(value, bool):
        return FORMATS[fmt](value)
    return str(value)


def data_value(value: Any) -> str:
    """The exact value a cell shows, for ``data-value`` (JSON: numbers round-trip exactly)."""
    return json.dumps(_finite(value), default=str)


# ---------------------------------------------------------------------------- sql and assets


def sql_of(name: str) -> str:
    """The SQL behind a figure: a saved query's text, or a named view's file."""
    if name in queries.saved():
        return queries.text(name)
    from archsql.views import view_files

    for f in view_files():
        if f.name == name:
            return f.sql
    from archsql.design.store import SQL_DIR

    for design in (SQL_DIR / "views" / f"{name}.sql", SQL_DIR / f"{name}.sql"):
        if design.is_file():
            return design.read_text(encoding="utf-8")
    raise QueryError(f"no saved query or view named '{name}'")


def _write_sql_pages(env, out: Path) -> None:
    template = env.get_template("sql.html.j2")
    for name in _sources():
        kind = (  # design views and queries: run against the design store
            "saved query" if name in queries.saved() else "saved design query" if design_query(name) else "view"
        )
        (out / "sql" / f"{name}.html").write_text(
            template.render(name=name, kind=kind, sql=sql_of(name), root="../", pages=PAGES, models=[], model=None),
            encoding="utf-8",
        )


def _write_assets(out: Path) -> None:
    for path in (HERE / "static").iterdir():
        shutil.copyfile(path, out / "assets" / path.name)
    target = out / "assets" / "vega.js"
    target.write_text(vega_bundle(), encoding="utf-8")


def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script (vl-convert's bundle), cached per version."""
    import vl_convert

    version = vl_convert.get_vegalite_versions()[-1]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "archsql"
    path = cache / f"vega-bundle-{vl_convert.get_vega_version()}-{version}.js"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    text = vl_convert.javascript_bundle(vl_version=version)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError:
        pass  # no cache where the home is read-only: the next build bundles again
    return text


def serve(out: Path, port: int = 8000):
    """An HTTP server of the folder ``out`` on loopback only (``serve_forever`` runs it); a port
    in use is a :class:`QueryError` naming it."""
    import functools as ft
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # no line per request
            pass

    try:
        return ThreadingHTTPServer(("127.0.0.1", port), ft.partial(Quiet, directory=str(out)))
    except OSError as exc:
        raise QueryError(
            f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}",
            [Issue("give another --port (0 picks a free one), or open index.html from disk")],
        ) from None
