"""``archsql report``: the deployment explorer of one model × deployment as one file to share.

The report shows the explorer page's figures (:data:`archsql.site.pages.DEPLOY`) from the same
saved queries, filtered to the model, the deployment and (for the roofline) the workload,
with each figure's rows as a table and its SQL inline.  Three forms of one document:

- ``html``: self-contained: the CSS, the Vega bundle vl-convert ships, the page script and
  the rows are inline, so it opens from disk with no network; the charts are interactive.
- ``md``: the tables in Markdown and each chart as an SVG that vl-convert renders, written
  in a folder ``<stem>_files/`` beside the file.
- ``pdf``: the html form with the charts as those SVGs (no script), printed by headless
  chromium through playwright (``Page.pdf``).  Why this route: a report is tables and charts
  laid out over pages, which needs a layout engine; chromium is the one the site's tests
  already drive, while vl-convert's ``vegalite_to_pdf`` turns one chart into one document
  and cannot lay out a table.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsql.errors import Issue, QueryError, StoreError, did_you_mean
from archsql.site.build import HERE, _by_model, _columnar, _run_sources, _spec, show, slug, sql_of, vega_bundle
from archsql.site.pages import DEPLOY, Figure

FORMATS = ("html", "md", "pdf")


@dataclass(frozen=True)
class ReportFile:
    path: Path
    workload: str | None  # the roofline's workload (given, or the first of the deployment's)
    bytes: int
    images: tuple[Path, ...] = ()  # md: the charts' SVG files


def chromium() -> str | None:
    """Debian's chromium (``apt-get install chromium``), or ``$ARCHSQL_CHROMIUM``."""
    for candidate in (os.environ.get("ARCHSQL_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


def _names(db: Path, sql: str) -> list[str]:
    from archsql.api import query

    return [v for v in query(sql, db=db).column(0).to_pylist() if v is not None]


def _check(kind: str, name: str, known: Sequence[str], fix: str) -> None:
    if name not in known:
        hint = did_you_mean(name, known) or f"known {kind}s: {', '.join(sorted(known)[:12])}"
        raise QueryError(f"{kind} '{name}' is not in the store ({fix})", [Issue(f"no {kind} '{name}'", hint=hint)])


def report_rows(
    db: str | Path, model: str, deployment: str, workload: str | None = None
) -> tuple[dict[str, list[dict[str, Any]]], str | None]:
    """Each source's rows for the report (per figure: :func:`figure_rows`) and the roofline's
    workload; an unknown model, deployment or workload is a :class:`QueryError` naming the
    closest one."""
    db = Path(db)
    if not db.is_file():
        raise StoreError(f"no store at {db}", [Issue("build one first: archsql build [MODELS] (or give --db PATH)")])
    _check("model", model, _names(db, "select model from model_summary"), "archsql build MODEL adds one")
    _check(
        "deployment",
        deployment,
        _names(db, "select deployment from base_deployments"),
        "archsql deployment list shows them; archsql deployment add adds one",
    )
    if workload is not None:
        _check(
            "workload",
            workload,
            _names(db, "select workload from base_workloads"),
            "archsql workload list shows them; archsql workload add adds one",
        )
    names = list(dict.fromkeys(s for f in DEPLOY.figures for s in f.sources))
    tables = _run_sources(db, DEPLOY.store, names, model)
    rows = {name: _by_model(table).get(model, []) for name, table in tables.items()}
    if workload is None:  # the explorer's choice: the first workload of the figures it filters
        workload = next(
            (
                r["workload"]
                for f in DEPLOY.figures
                if "workload" in f.filters
                for r in rows[f.source]
                if r.get("deployment") == deployment
            ),
            None,
        )
    return rows, workload


def figure_rows(figure: Figure, rows: list[dict[str, Any]], deployment: str, workload: str | None) -> list[dict]:
    """A figure's rows as the explorer shows them with this deployment and workload selected."""
    chosen = {"deployment": deployment, "workload": workload}
    return [r for r in rows if all(r.get(f) == chosen[f] for f in figure.filters if f in r and f in chosen)]


def _chosen(spec: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    """The spec with each param ``chosen_FIELD`` set to the report's FIELD (as the page sets it
    from its control)."""
    if "params" not in spec:
        return spec
    params = [{**p, "value": chosen.get(p["name"].removeprefix("chosen_"), p.get("value"))} for p in spec["params"]]
    return {**spec, "params": params}


def _svg(figure: Figure, data: dict[str, list[dict]], chosen: dict[str, Any]) -> str:
    import vl_convert

    spec = _chosen(dict(_spec(figure)), chosen)
    spec["datasets"] = {s: data[s] for s in figure.sources}
    return vl_convert.vegalite_to_svg(spec)


def write_report(
    db: str | Path,
    model: str,
    deployment: str,
    workload: str | None = None,
    fmt: str = "html",
    out: str | Path | None = None,
) -> ReportFile:
    """Write the report of ``model`` on ``deployment`` as ``fmt`` (html, md, pdf) to ``out``
    (default ``report-<model>-<deployment>.<fmt>``)."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown report format '{fmt}'", [Issue(f"one of {', '.join(FORMATS)}")])
    out = Path(out) if out is not None else Path(f"report-{slug(model)}-{slug(deployment)}.{fmt}")
    if out.is_dir():
        raise QueryError(f"--out {out} is a folder", [Issue(f"give a file name, e.g. {out / ('report.' + fmt)}")])
    if not out.parent.is_dir():
        raise QueryError(f"--out {out}: no folder {out.parent}", [Issue("create it first, or give another path")])
    browser = chromium() if fmt == "pdf" else None
    if fmt == "pdf" and browser is None:
        raise QueryError(
            "--format pdf prints the report with chromium, and none is installed",
            [
                Issue(
                    "apt-get install chromium (or set ARCHSQL_CHROMIUM to a chromium binary); "
                    "--format html writes the same report, which any browser prints to PDF"
                )
            ],
        )
    rows, workload = report_rows(db, model, deployment, workload)
    figures = [
        {"figure": f, "rows": figure_rows(f, rows[f.source], deployment, workload), "sql": sql_of(f.source)}
        for f in DEPLOY.figures
    ]
    for entry in figures:
        f = entry["figure"]
        entry["data"] = {s: figure_rows(f, rows[s], deployment, workload) for s in f.sources}
        entry["also_sql"] = [(s, sql_of(s)) for s in f.also]
    context = {"model": model, "deployment": deployment, "workload": workload, "store": Path(db).name}
    chosen = {"deployment": deployment, "workload": workload}
    images: list[Path] = []
    if fmt == "md":
        folder = out.with_name(f"{out.stem}_files")
        for entry in figures:
            if entry["figure"].chart and entry["rows"]:
                folder.mkdir(exist_ok=True)
                path = folder / f"{entry['figure'].id}.svg"
                path.write_text(_svg(entry["figure"], entry["data"], chosen), encoding="utf-8")
                entry["image"] = f"{folder.name}/{path.name}"
                images.append(path)
        out.write_text(_render("report.md.j2", figures=figures, **context), encoding="utf-8")
    elif fmt == "html":
        payload = {
            "data": {f"{e['figure'].id}:{s}": _columnar(rows) for e in figures for s, rows in e["data"].items()},
            "specs": {e["figure"].id: _chosen(_report_spec(e["figure"]), chosen) for e in figures if e["figure"].chart},
            "filters": {},
            "sources": {e["figure"].id: [f"{e['figure'].id}:{s}" for s in e["figure"].sources] for e in figures},
        }
        scripts = [_script(vega_bundle()), _script((HERE / "static" / "site.js").read_text(encoding="utf-8"))]
        load = "ARCHSQL.load(" + json.dumps(payload, separators=(",", ":"), allow_nan=False, default=str) + ");"
        scripts.append(load.replace("<", "\\u003c"))
        html = _render("report.html.j2", figures=figures, static=False, scripts=scripts, **context)
        out.write_text(html, encoding="utf-8")
    else:
        for entry in figures:
            if entry["figure"].chart and entry["rows"]:
                entry["svg"] = _svg(entry["figure"], entry["data"], chosen)
        html = _render("report.html.j2", figures=figures, static=True, scripts=[], **context)
        _print_pdf(browser, html, out)
    return ReportFile(out, workload, out.stat().st_size, tuple(images))


def _report_spec(figure: Figure) -> dict[str, Any]:
    """The figure's spec with its datasets named per figure (two figures of one query filter
    its rows differently)."""
    text = json.dumps(_spec(figure))
    for s in figure.sources:
        text = text.replace(json.dumps({"name": s}), json.dumps({"name": f"{figure.id}:{s}"}))
    return json.loads(text)


def _script(js: str) -> str:
    """A script's text safe inside ``<script>``: no ``</script`` or ``<!--`` ends it early
    (``<\\/`` is ``</`` in a JavaScript string or regular expression)."""
    return js.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT").replace("<!--", "<\\!--")


def _render(template: str, **context: Any) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html.j2"], default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["show"] = show
    env.filters["value"] = lambda v: json.dumps(v, default=str)
    env.filters["cell"] = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    from archsql import __version__

    css = (HERE / "static" / "site.css").read_text(encoding="utf-8")
    return env.get_template(template).render(version=__version__, css=css, **context)


def _print_pdf(browser: str | None, html: str, out: Path) -> None:
    """Print in a thread of its own: playwright's sync API refuses a thread that runs an
    asyncio loop (a notebook, or another sync_playwright session of the caller's)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(_print_pdf_here, browser, html, out).result()


def _print_pdf_here(browser: str | None, html: str, out: Path) -> None:
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        raise QueryError(
            "--format pdf needs playwright to drive chromium",
            [Issue("pip install 'archsql[pdf]' (or --format html, which any browser prints to PDF)")],
        ) from None

    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            try:
                page = b.new_page()
                page.set_content(html, wait_until="load")
                page.pdf(path=str(out), format="A4", landscape=True, print_background=True, outline=True)
            finally:
                b.close()
    except Error as exc:
        raise QueryError(
            f"chromium ({browser}) could not print the report: {str(exc).splitlines()[0]}",
            [Issue("--format html writes the same report, which any browser prints to PDF")],
        ) from None
