"""``archsql site``: every page opens from file:// in a real headless browser (Debian's
chromium driven by playwright) with no console errors, and what it shows is the store's own
query results: numbers read back from the DOM and from the charts' bound data are compared
with the saved queries (and the formulas table) run against the same store."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from archsql import queries
from archsql.cli import cli
from archsql.site.build import show, slug
from archsql.site.pages import CORPUS, DEPLOY, DESIGN, GALLERY, PAGES

# Full attention, a sliding window, and an encoder with a real checkpoint attached
# (all-MiniLM-L6-v2's header: tests/fixtures/tensors) and no decode phase.
MODELS = ("Meta-Llama-3.1-8B", "Mistral-7B-Instruct-v0.1", "all-MiniLM-L6-v2")
CHECKPOINTED = "all-MiniLM-L6-v2"


def chromium() -> str | None:
    """Debian's chromium (installed by .ci/run), or $ARCHSQL_CHROMIUM."""
    for candidate in (os.environ.get("ARCHSQL_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


@pytest.fixture(scope="module")
def site_db(store_of, tmp_path_factory) -> Path:
    from archsql.ingest import read_checkpoint
    from archsql.store import write_checkpoint
    from tests.test_ingest_headers import write_header
    from tests.test_reconciliation import minilm_header

    tmp = tmp_path_factory.mktemp("site-store")
    db = tmp / "store.duckdb"
    shutil.copyfile(store_of(*MODELS), db)
    header = write_header(tmp / "model.safetensors", minilm_header())
    write_checkpoint(db, read_checkpoint(header), model=CHECKPOINTED)
    args = ["--db", str(db), "sweep", MODELS[0], *[a for layout in SWEPT for a in ("--layout", layout)]]
    result = CliRunner().invoke(cli, [*args, "--batch", "1,16,128", "--context", "8k", "--save", SWEEP])
    assert result.exit_code == 0, result.output
    assert f"saved 9 points as sweep '{SWEEP}' of {MODELS[0]}" in result.output
    return db


# A sweep of Llama saved in the site's store (the explorer plots its frontier by layout)
SWEEP, SWEPT = "tp-vs-dp", ("tp8", "tp4,dp2", "dp8")


# Two components for the attention slot (a growing KV cache, a constant recurrent state)
COMPONENTS = ("gqa_attention@Meta-Llama-3.1-8B", "gated_deltanet@Qwen3.5-27B")


# A comparison, then an edit of Llama (its attention swapped for a gated DeltaNet, dims from
# Qwen3.5-27B: nodes added, removed and changed) and an audit of it against Llama, in one design
# store: the later commands replace its workloads and deployments, and the page still shows the
# comparison as it was made
EDIT = "llama-deltanet"


@pytest.fixture(scope="module")
def design_db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("design")
    db = root / "design.duckdb"
    store = ["--store", str(db)]
    args = ["compare", "attention", *[a for c in COMPONENTS for a in ("-C", c)], "--d-model", "2048"]
    result = CliRunner().invoke(cli, [*args, "--context", "2k,32k,128k", *store, "--format", "json"])
    assert result.exit_code == 0, result.output
    (root / "compared.json").write_text(result.stdout)  # the rows as `archsql compare` printed them
    args = ["edit", MODELS[0], "--swap", "attention=gated_deltanet", "--dims-from", "Qwen3.5-27B", "--name", EDIT]
    result = CliRunner().invoke(cli, [*args, "--out", str(root), "--context", "32k", *store])
    assert result.exit_code == 0, result.output
    record = {  # an evidence record of the audit (archsql/design/audit.py reads its fields)
        "benchmark": "long_sequence_memory",
        "evidence_level": "same_family_benchmark",
        "baseline": MODELS[0],
        "candidate": EDIT,
        "workload": {"suite": "RULER", "context": 32768},
        "quality": {"metric": "ruler_32k", "baseline": 0.82, "candidate": 0.74, "pass": False},
        "cost": {"metric": "decode tokens/s", "baseline": 1200, "candidate": 2900, "pass": True},
        "failure": None,
    }
    (root / "ruler.json").write_text(json.dumps(record))
    args = ["audit", MODELS[0], str(root / f"{EDIT}.yaml"), "--changed-field", "attention_type", *store]
    result = CliRunner().invoke(cli, [*args, "--evidence", str(root / "ruler.json")])
    assert result.exit_code in (0, 1), result.output  # 1: the decision is reject
    return db


@pytest.fixture(scope="module")
def site(site_db, design_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    args = ["--db", str(site_db), "site", "--out", str(out), "--design-store", str(design_db)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "wrote 9 pages for 3 models" in result.output
    return out


@pytest.fixture(scope="module")
def browser():
    path = chromium()
    if path is None:
        pytest.skip("no chromium on this machine (apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    """A page opened from file://, its console messages and uncaught errors collected."""

    def __init__(self, browser, url: str):
        self.page = browser.new_page()
        self.messages: list[tuple[str, str]] = []
        self.page.on("console", lambda m: self.messages.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.messages.append(("pageerror", str(e))))
        self.page.goto(url)
        self.wait(1)

    def wait(self, renders: int) -> None:
        self.page.wait_for_function(f"Number(document.body.dataset.ready || 0) >= {renders}", timeout=20_000)

    def renders(self) -> int:
        return int(self.page.evaluate("() => Number(document.body.dataset.ready || 0)"))

    def change(self, action) -> None:
        """Run ``action`` (a filter changed) and wait until the page has drawn again."""
        before = self.renders()
        action()
        self.wait(before + 1)

    def errors(self) -> list[tuple[str, str]]:
        return [m for m in self.messages if m[0] in ("error", "pageerror", "warning")]

    def chart_rows(self, figure: str) -> list[dict]:
        """The rows a chart's Vega view holds in its named dataset (what it plots)."""
        return self.page.evaluate(
            "(id) => { const v = ARCHSQL.views[id]; return v ? v.data(ARCHSQL.specs[id].data.name) : null; }", figure
        )

    def cells(self, table: str) -> list[dict]:
        """Each shown row of a table: column -> (data-value parsed, text shown)."""
        return self.page.evaluate(
            """(id) => Array.from(document.querySelectorAll(`#${id} tbody tr`)).filter((tr) => !tr.hidden)
                 .map((tr) => Object.fromEntries(Array.from(tr.querySelectorAll('td[data-col]'))
                   .map((td) => [td.dataset.col, [JSON.parse(td.dataset.value), td.textContent.trim()]])))""",
            table,
        )

    def close(self) -> None:
        self.page.close()


def url(site: Path, path: str) -> str:
    return (site / path).resolve().as_uri()


@pytest.fixture(scope="module")
def opened(browser):
    """``opened(site, path)``: the page, loaded once for the whole file (the browser tests read
    the same pages; a test that changes a filter sets it back)."""
    pages: dict[str, Page] = {}

    def open_page(site: Path, path: str) -> Page:
        address = url(site, path)
        if address not in pages:
            pages[address] = Page(browser, address)
        return pages[address]

    yield open_page
    for page in pages.values():
        page.close()


def page_paths() -> list[str]:
    paths = ["index.html", "corpus.html", "design.html"]
    for model in MODELS:
        paths += [f"{p.slug}/{slug(model)}.html" for p in PAGES if p.per_model]
    return paths


def rows_of(name: str, db: Path, model: str | None = None) -> list[dict]:
    rows = queries.run(name, db=db).to_pylist()
    return [r for r in rows if model is None or r["model"] == model]


def key(row: dict, *cols: str) -> tuple:
    return tuple(row[c] for c in cols)


def same(shown, stored) -> bool:
    """Equal, floats to 1e-12 relative: a float summed by two runs of one query may differ in
    its last bit (DuckDB adds in parallel), which is not a number the page changed."""
    if isinstance(shown, list | tuple) and isinstance(stored, list | tuple):
        return len(shown) == len(stored) and all(same(a, b) for a, b in zip(shown, stored, strict=True))
    if isinstance(shown, float) or isinstance(stored, float):
        return shown is not None and stored is not None and math.isclose(shown, stored, rel_tol=1e-12)
    return shown == stored


# ---------------------------------------------------------------------------- without a browser


def test_unknown_model_is_a_located_error(site_db, tmp_path):
    result = CliRunner().invoke(cli, ["--db", str(site_db), "site", "--out", str(tmp_path), "--models", "Llama-3.1-8B"])
    assert result.exit_code == 2
    assert "model 'Llama-3.1-8B' is not in the store" in result.output
    assert "did you mean 'Meta-Llama-3.1-8B'?" in result.output
    assert "Traceback" not in result.output


def test_missing_store_says_how_to_build_one(tmp_path):
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "none.duckdb"), "site", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "no store at" in result.output and "archsql build" in result.output


@pytest.fixture(scope="module")
def plain_site(site_db, tmp_path_factory) -> Path:
    """The site of one model (``-m``) and no design store."""
    out = tmp_path_factory.mktemp("plain") / "one"
    result = CliRunner().invoke(cli, ["site", "--db", str(site_db), "--out", str(out), "-m", MODELS[0]])
    assert result.exit_code == 0, result.output
    return out


def test_models_option_writes_only_those(plain_site):
    out = plain_site
    assert sorted(p.name for p in (out / "model").iterdir()) == [f"{slug(MODELS[0])}.html"]
    payload = (out / "data" / "gallery.js").read_text()
    assert MODELS[0] in payload and MODELS[1] not in payload


def test_out_is_a_new_folder_or_an_earlier_site(site_db, tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    result = CliRunner().invoke(cli, ["site", "--db", str(site_db), "--out", str(other)])
    assert result.exit_code == 2 and "holds other files and no earlier site" in result.output
    assert (other / "notes.txt").read_text() == "keep me" and sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    result = CliRunner().invoke(cli, ["site", "--db", str(site_db), "--out", str(other / "notes.txt")])
    assert result.exit_code == 2 and "is a file" in result.output
    # writing again over an earlier site leaves no page of a model no longer asked for
    out = tmp_path / "again"
    for models in (f"{MODELS[0]},{MODELS[1]}", MODELS[1]):
        result = CliRunner().invoke(cli, ["site", "--db", str(site_db), "--out", str(out), "--models", models])
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "model").iterdir()) == [f"{slug(MODELS[1])}.html"]


def test_serve_answers_on_loopback(site):
    import threading
    import urllib.request

    from archsql.site.build import serve

    server = serve(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=10) as r:
            assert r.status == 200 and b"Gallery" in r.read()
        from archsql.errors import QueryError

        with pytest.raises(QueryError, match=f"cannot serve on 127.0.0.1:{port}"):
            serve(site, port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_every_figure_links_to_its_sql(site):
    from archsql.site.build import design_query

    for page in PAGES:
        for figure in page.figures:
            for source in figure.sources:
                text = (site / "sql" / f"{source}.html").read_text()
                if source in queries.saved():
                    first = queries.text(source).splitlines()[0]
                elif design_query(source):
                    first = design_query(source).read_text().splitlines()[0]
                else:
                    first = f"view {source}"
                assert first.replace("'", "&#39;").replace(">", "&gt;") in text or first in text, source


# ---------------------------------------------------------------------------- in the browser


@pytest.mark.parametrize("path", page_paths())
def test_page_opens_from_file_without_console_errors(opened, site, path):
    assert opened(site, path).errors() == []


def test_sql_pages_open_without_errors(browser, site):
    page = browser.new_page()  # one tab goes to each SQL page in turn
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.type))
    page.on("pageerror", lambda e: messages.append("pageerror"))
    for path in sorted((site / "sql").iterdir()):
        page.goto(path.resolve().as_uri())
        assert page.locator("#sql").inner_text().strip(), path.name
        assert [m for m in messages if m in ("error", "pageerror")] == [], path.name
    page.close()


def test_gallery_table_shows_the_query_rows(opened, site, site_db):
    page = opened(site, "index.html")
    shown = {c["model"][0]: c for c in page.cells("table-models")}
    expected = {r["model"]: r for r in rows_of("site_gallery", site_db)}
    assert sorted(shown) == sorted(expected) == sorted(MODELS)
    columns = GALLERY.figures[0].columns
    for model, row in expected.items():
        for column in columns:
            value, text = shown[model][column.name]
            assert same(value, row[column.name]), (model, column.name)
            if column.name != "model":
                assert text == show(row[column.name], column), (model, column.name)


def test_gallery_charts_plot_the_query_rows(opened, site, site_db):
    page = opened(site, "index.html")
    cols = ("model", "context", "bytes_per_request")
    plotted = sorted(key(r, *cols) for r in page.chart_rows("kv_curve"))
    assert same(plotted, sorted(key(r, *cols) for r in rows_of("site_kv_curve", site_db)))
    # the window flattens the curve: Mistral's cache stops growing past its 4096-token window
    mistral = sorted(
        (r["context"], r["bytes_per_request"]) for r in page.chart_rows("kv_curve") if "Mistral" in r["model"]
    )
    assert len(mistral) >= 3 and mistral[-1][1] == mistral[-2][1] > 0
    params = sorted(key(r, "model", "params", "active_params") for r in page.chart_rows("params"))
    assert same(params, sorted(key(r, "model", "params", "active_params") for r in rows_of("site_gallery", site_db)))


def test_gallery_filters_change_the_plotted_data(opened, site):
    page = opened(site, "index.html")
    before = {r["model"] for r in page.chart_rows("kv_curve")}
    page.change(lambda: page.page.fill("#filter-model", "mistral"))
    assert {r["model"] for r in page.chart_rows("kv_curve")} == {"Mistral-7B-Instruct-v0.1"} != before
    assert [c["model"][0] for c in page.cells("table-models")] == ["Mistral-7B-Instruct-v0.1"]
    assert page.page.inner_text("#shown-count") == "1"
    page.change(lambda: page.page.fill("#filter-model", ""))
    family = page.page.evaluate("() => document.querySelector('#filter-attention_family option[value=GQA]').value")
    page.change(lambda: page.page.select_option("#filter-attention_family", family))
    shown = {c["model"][0] for c in page.cells("table-models")}
    assert shown == {"Meta-Llama-3.1-8B", "Mistral-7B-Instruct-v0.1"}
    assert {r["model"] for r in page.chart_rows("params")} == shown
    page.change(lambda: page.page.select_option("#filter-attention_family", ""))  # as it was
    assert {r["model"] for r in page.chart_rows("params")} == set(MODELS)
    assert page.errors() == []


def test_gallery_sorts_by_a_column(opened, site):
    page = opened(site, "index.html")
    page.page.click("#table-models th[data-col=params]")
    asc = [c["params"][0] for c in page.cells("table-models")]
    page.page.click("#table-models th[data-col=params]")
    desc = [c["params"][0] for c in page.cells("table-models")]
    assert asc == sorted(asc) and desc == sorted(asc, reverse=True)


def test_inspector_nodes_carry_params_and_formula_tooltips(opened, site, site_db):
    model = "Meta-Llama-3.1-8B"
    page = opened(site, f"model/{slug(model)}.html")
    nodes = page.page.evaluate(
        """() => Array.from(document.querySelectorAll('#fig-graph tr[data-uid]')).map((tr) => ({
             uid: tr.dataset.uid,
             params: JSON.parse(tr.querySelector('td[data-col=params]').dataset.value),
             formula: tr.querySelector('.formula') ? tr.querySelector('.formula').getAttribute('title') : null,
             bound: tr.querySelector('.formula') ? tr.querySelector('.formula').textContent : null }))"""
    )
    con = duckdb.connect(str(site_db), read_only=True)
    formulas = dict(
        con.execute(
            "select uid, symbolic from formulas where model = ? and phase = 'prefill' and quantity = 'flops'", [model]
        ).fetchall()
    )
    params = dict(con.execute("select uid, params from int_node_params where model = ?", [model]).fetchall())
    uids = {r[0] for r in con.execute("select uid from base_nodes where model = ?", [model]).fetchall()}
    con.close()
    assert {n["uid"] for n in nodes} == uids
    with_formula = [n for n in nodes if n["formula"] is not None]
    assert len(with_formula) == len(formulas) > 10
    for n in nodes:
        assert n["formula"] == formulas.get(n["uid"]), n["uid"]
        assert n["params"] == params.get(n["uid"]), n["uid"]
    groups = page.page.evaluate(
        """() => Array.from(document.querySelectorAll('details.group > summary')).filter((s) => s.querySelector('.layers'))
             .map((s) => [s.querySelector('b').textContent, JSON.parse(s.querySelector('.layers').dataset.value)])"""
    )
    con = duckdb.connect(str(site_db), read_only=True)
    schedule = con.execute(
        "select template, count(*) from base_layer_schedule where model = ? group by template", [model]
    ).fetchall()
    con.close()
    assert sorted(groups) == sorted(list(r) for r in schedule) == [["dense", 32]]
    q_proj = next(n for n in nodes if n["uid"].endswith("self_attn.q_proj"))
    assert q_proj["formula"] == "2·B·d_head·d_model·n_heads·s" and q_proj["bound"] == "33554432·B·s"


def test_inspector_shows_the_checkpoint_or_says_there_is_none(opened, site, site_db):
    page = opened(site, f"model/{slug(CHECKPOINTED)}.html")
    cells = page.cells("table-checkpoint")
    con = duckdb.connect(str(site_db), read_only=True)
    expected = con.execute(
        "select canonical_name, status, actual_bytes from checkpoint_reconciliation where model = ?", [CHECKPOINTED]
    ).fetchall()
    con.close()
    assert len(expected) == 104
    assert sorted((c["canonical_name"][0], c["status"][0], c["actual_bytes"][0]) for c in cells) == sorted(expected)
    page = opened(site, f"model/{slug(MODELS[0])}.html")
    assert page.page.locator("#table-checkpoint").count() == 0
    assert "No checkpoint is attached to this model" in page.page.inner_text("#fig-checkpoint .empty")


def test_deployment_explorer_plots_the_selected_deployment(opened, site, site_db):
    model = "Meta-Llama-3.1-8B"
    page = opened(site, f"deploy/{slug(model)}.html")
    first = page.page.input_value("#filter-deployment")
    memory = rows_of("site_device_memory", site_db, model)
    cols = ("deployment", "workload", "stage", "part", "bytes")
    for n, deployment in enumerate(sorted({r["deployment"] for r in memory})[:2]):
        if n:
            page.change(lambda deployment=deployment: page.page.select_option("#filter-deployment", deployment))
        assert page.page.input_value("#filter-deployment") == deployment
        plotted = sorted(key(r, *cols) for r in page.chart_rows("memory"))
        assert same(plotted, sorted(key(r, *cols) for r in memory if r["deployment"] == deployment))
        steps = sorted(key(r, "workload", "bound", "time_s") for r in page.chart_rows("step_time"))
        assert same(
            steps,
            sorted(
                key(r, "workload", "bound", "time_s")
                for r in rows_of("site_step_time", site_db, model)
                if r["deployment"] == deployment
            ),
        )
    # the throughput frontier plots every deployment and marks the chosen one (a param, not a filter)
    assert page.page.evaluate("() => ARCHSQL.views.pareto.signal('chosen_deployment')") == deployment
    workload = page.page.input_value("#filter-workload")
    roofline = sorted(key(r, "op", "bound", "arithmetic_intensity", "flops_per_s") for r in page.chart_rows("roofline"))
    assert same(
        roofline,
        sorted(
            key(r, "op", "bound", "arithmetic_intensity", "flops_per_s")
            for r in rows_of("site_roofline", site_db, model)
            if r["deployment"] == deployment and r["workload"] == workload
        ),
    )
    assert page.errors() == []
    page.change(lambda: page.page.select_option("#filter-deployment", first))  # as it was


def test_design_playground_shows_the_comparison_rows(opened, site, design_db):
    """The page's comparison is the saved design query's rows, which are the rows `archsql compare`
    printed, though an edit and an audit ran in the store after it (the live view now reads their
    workloads: one context, no SOL rows on the comparison's deployment)."""
    page = opened(site, "design.html")
    expected = design_rows("site_component_comparison", design_db)
    printed = json.loads((design_db.parent / "compared.json").read_text())
    assert len(expected) == len(COMPONENTS) * 3
    assert same(
        [list(r.values()) for r in expected], [[p[c] for c in r] for p, r in zip(printed, expected, strict=True)]
    )
    con = duckdb.connect(str(design_db), read_only=True)
    live = con.execute("select distinct context from component_comparison").fetchall()
    con.close()
    assert live == [(32768,)]  # the edit's context: why the comparison is kept as rows
    cells = page.cells("table-comparison")
    for column in DESIGN.figures[0].columns:
        assert same([c[column.name][0] for c in cells], [r[column.name] for r in expected]), column.name
    cols = ("component", "origin", "context", "cache_bytes_per_request", "prefill_time_s", "decode_time_s")
    for figure in ("comparison_cache", "comparison_prefill", "comparison_decode"):
        assert same(sorted(key(r, *cols) for r in page.chart_rows(figure)), sorted(key(r, *cols) for r in expected))
    # the recurrent state stays flat with context, the KV cache grows
    state = {r["context"]: r["cache_bytes_per_request"] for r in expected if r["component"] == "gated_deltanet"}
    kv = {r["context"]: r["cache_bytes_per_request"] for r in expected if r["component"] == "gqa_attention"}
    assert len(set(state.values())) == 1 and kv[131072] == 64 * kv[2048]
    assert page.errors() == []


def design_rows(name: str, db: Path) -> list[dict]:
    """The rows of the saved design query ``name`` (archsql/design/sql) on the design store ``db``."""
    from archsql.api import query
    from archsql.site.build import design_query

    return query(design_query(name).read_text(), db=db).to_pylist()


def test_design_playground_shows_the_edit_ledger_diff_and_audit_card(opened, site, design_db):
    """On the page the comparison test loaded: the ledger's numbers are the saved query's rows
    (and the edit's own ledger, as `archsql edit` printed it), the graph highlights exactly the
    nodes the recorded diff names, and the audit card shows the decision the store holds."""
    page = opened(site, "design.html")
    figure = next(f for f in DESIGN.figures if f.id == "edit_ledger")
    expected = design_rows("site_edit_ledger", design_db)
    assert {r["edit"] for r in expected} == {EDIT} and len(expected) > 10
    cells = page.cells("table-edit_ledger")
    for column in figure.columns:
        assert same([c[column.name][0] for c in cells], [r[column.name] for r in expected]), column.name
        for c, r in zip(cells, expected, strict=True):  # shown in the row's unit
            assert c[column.name][1] == show(r[column.name], column, r), column.name
    con = duckdb.connect(str(design_db), read_only=True)
    recorded = con.execute("select quantity, old, new from design_edit_ledger where scope = 'model'").fetchall()
    con.close()
    model = {q: (old, new) for q, old, new in recorded}
    assert model["kv_bytes_per_token"][1] == 0 < model["kv_bytes_per_token"][0]  # no KV cache after the swap
    assert model["state_bytes_per_request"][1] > 0 == model["state_bytes_per_request"][0]  # a recurrent state
    # the graph diff: a node only the derived model has is added, one only the base has removed
    # (the base's nodes, from the design store), one the recorded diff names a change of changed;
    # exactly those are highlighted
    con = duckdb.connect(str(design_db), read_only=True)
    old_nodes, new_nodes = (
        {r[0] for r in con.execute("select uid from base_nodes where model = ?", [m]).fetchall()}
        for m in (MODELS[0], EDIT)
    )
    diff = con.execute(
        "select path, status from design_edit_diff where edit = ? and path not like '$%'", [EDIT]
    ).fetchall()
    con.close()
    expected = {u: "added" for u in new_nodes - old_nodes} | {u: "removed" for u in old_nodes - new_nodes}
    expected |= {path: "changed" for path, st in diff if st == "changed"}
    assert {p for p, st in diff if st == "only_b"} <= new_nodes - old_nodes  # the diff agrees
    assert {p for p, st in diff if st == "only_a"} <= old_nodes - new_nodes
    marked = page.page.evaluate(
        """(edit) => Array.from(document.querySelectorAll(`.edit-graph[data-edit="${edit}"] tr[data-uid]`))
             .map((tr) => [tr.dataset.uid, tr.dataset.status, tr.className])""",
        EDIT,
    )
    highlighted = {uid: st for uid, st, cls in marked if st != "same"}
    assert highlighted == expected and set(highlighted.values()) == {"added", "removed", "changed"}
    assert all(cls == f"diff-{st}" for uid, st, cls in marked if st != "same")
    assert all(cls == "" for uid, st, cls in marked if st == "same") and any(st == "same" for _, st, _ in marked)
    assert {uid for uid, _, _ in marked} == old_nodes | new_nodes  # every node of both, once
    graph = design_rows("site_edit_graph", design_db)
    assert sorted((r["uid"], r["status"]) for r in graph) == sorted((uid, st) for uid, st, _ in marked)
    # the audit card: its decision and evidence level as the store holds them
    (card,) = design_rows("site_audit_cards", design_db)
    shown = page.page.evaluate(
        """() => Array.from(document.querySelectorAll('article.card')).map((a) => ({
             audit: a.dataset.audit, decision: JSON.parse(a.querySelector('.decision').dataset.value),
             level: a.querySelector('[data-col=evidence_level]').textContent,
             reasons: Array.from(a.querySelectorAll('.reasons li')).map((li) => li.textContent) }))"""
    )
    assert shown == [
        {
            "audit": card["audit_id"],
            "decision": card["decision"],
            "level": card["evidence_level"],
            "reasons": card["reasons"].split(" | "),
        }
    ]
    assert card["decision"] in ("reject", "tune", "accept") and page.errors() == []
    evidence = design_rows("site_audit_evidence", design_db)
    rows = page.page.evaluate(
        """() => Array.from(document.querySelectorAll('article.card table.evidence tbody tr')).map((tr) =>
             [tr.dataset.path, tr.querySelector('[data-col=status]').textContent])"""
    )
    assert rows == [[e["path"], e["status"]] for e in evidence] and len(rows) == 1


def test_design_edit_record_is_keyed_and_replaced(design_db, tmp_path):
    """The edit's tables have their primary keys; the same edit (derived model) recorded again
    replaces its rows rather than adding to them."""
    from types import SimpleNamespace

    from archsql.design.diff import DIFF_SCHEMA, GraphDiff
    from archsql.design.edit import EDIT_KEYS, EditReport, record_edit

    copy = tmp_path / "design.duckdb"
    shutil.copyfile(design_db, copy)
    con = duckdb.connect(str(copy), read_only=True)
    keys = dict(
        con.execute(
            "select table_name, constraint_column_names from duckdb_constraints() "
            "where constraint_type = 'PRIMARY KEY' and table_name like 'design_edit%'"
        ).fetchall()
    )
    before = [con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in EDIT_KEYS]
    ledger = con.sql(
        "select scope, template, layers_old, layers_new, quantity, unit, old, new, delta, ratio "
        "from design_edit_ledger where edit = ? order by position limit 2",
        params=[EDIT],
    ).to_arrow_table()
    con.close()
    assert keys == {t: list(k) for t, k in EDIT_KEYS.items()} and before[0] == 1 and min(before[1:]) > 2
    derived = SimpleNamespace(name=EDIT, base=MODELS[0], path=tmp_path / "x.yaml", swapped={}, provenance={})
    derived.dims_dropped = ()
    report = EditReport(derived, copy, 8192, 1, "bf16", "8xH200-tp8", ledger)
    record_edit(report, GraphDiff(MODELS[0], EDIT, "model", "prefill", DIFF_SCHEMA.empty_table()))
    con = duckdb.connect(str(copy), read_only=True)
    assert [con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in EDIT_KEYS] == [1, 2, 0]
    con.close()


def test_design_playground_without_a_design_store_says_so(browser, plain_site):
    page = Page(browser, url(plain_site, "design.html"))
    for figure in DESIGN.figures:
        text = page.page.inner_text(f"#fig-{figure.id} .empty")
        assert "(or no design store was given)" in text and "--store PATH" in text, figure.id
    assert page.page.locator("svg").count() == 0 and page.errors() == []
    page.close()


def test_design_store_errors_are_located(site_db, tmp_path):
    args = ["site", "--db", str(site_db), "--out", str(tmp_path / "s"), "--design-store"]
    result = CliRunner().invoke(cli, [*args, str(tmp_path / "none.duckdb")])
    assert result.exit_code == 2 and "no design store at" in result.output and "archsql compare" in result.output
    result = CliRunner().invoke(cli, [*args, str(site_db)])  # a main store: no comparison, edit or audit in it
    assert result.exit_code == 2 and "holds no comparison, model edit or audit card" in result.output
    assert "archsql edit MODEL" in result.output and "Traceback" not in result.output


def test_pareto_frontier_is_the_undominated_points(opened, site, site_db):
    model = "Meta-Llama-3.1-8B"
    page = opened(site, f"deploy/{slug(model)}.html")
    cols = ("deployment", "workload", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "on_frontier")
    plotted = sorted(key(r, *cols) for r in page.chart_rows("pareto"))
    rows = rows_of("site_pareto", site_db, model)
    assert same(plotted, sorted(key(r, *cols) for r in rows)) and len(rows) > 10
    step = {(r["deployment"], r["workload"]): r for r in rows}
    assert len(step) == len(rows)  # one point per deployment × decode workload that fits

    def dominated(p):
        return any(
            q["tokens_per_s_per_gpu"] >= p["tokens_per_s_per_gpu"]
            and q["tokens_per_s_per_user"] >= p["tokens_per_s_per_user"]
            and (q["tokens_per_s_per_gpu"], q["tokens_per_s_per_user"])
            != (p["tokens_per_s_per_gpu"], p["tokens_per_s_per_user"])
            for q in rows
        )

    assert [r["on_frontier"] for r in rows] == [not dominated(r) for r in rows]
    assert any(r["on_frontier"] for r in rows)
    from archsql.api import query  # the store's derived step_sol (a plain connection computes the view again)

    sql = "select count(*) as n from step_sol where model = 'Meta-Llama-3.1-8B' and phase = 'decode' and fits and time_s > 0"
    assert query(sql, db=site_db).column("n").to_pylist() == [len(rows)]


def test_sweep_frontier_plots_the_saved_sweep_with_its_layouts_labelled(opened, site, site_db):
    """The explorer plots the saved sweep's points as site_sweep_pareto returns them; its
    frontier is the points no other fitting point beats on both axes (the oracle below, over the
    stored points, and `archsql sweep --pareto`'s own frontier), and each frontier point is
    labelled with its layout and batch."""
    from archsql import sweep as sweeps

    model = MODELS[0]
    page = opened(site, f"deploy/{slug(model)}.html")
    rows = rows_of("site_sweep_pareto", site_db, model)
    cols = ("sweep", "layout", "batch", "context", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "on_frontier")
    assert same(sorted(key(r, *cols) for r in page.chart_rows("sweep")), sorted(key(r, *cols) for r in rows))
    assert {r["layout"] for r in rows} == set(SWEPT) and {r["sweep"] for r in rows} == {SWEEP}
    assert page.page.input_value("#filter-sweep") == SWEEP and not any(r["stale"] for r in rows)
    con = duckdb.connect(str(site_db), read_only=True)
    stored = [
        dict(zip(("layout", "batch", "fits", "per_user", "per_gpu", "problems"), r, strict=True))
        for r in con.execute(
            "select layout, batch, fits, tokens_per_s_per_user, tokens_per_s_per_gpu, layout_problems "
            "from sweep_points where model = ? and sweep = ?",
            [model, SWEEP],
        ).fetchall()
    ]
    con.close()
    assert len(stored) == 3 * len(SWEPT)
    fitting = [r for r in stored if r["fits"] and r["problems"] is None]
    assert len(fitting) == len(rows)

    def dominated(p):
        return any(
            q["per_gpu"] >= p["per_gpu"]
            and q["per_user"] >= p["per_user"]
            and (q["per_gpu"], q["per_user"]) != (p["per_gpu"], p["per_user"])
            for q in fitting
        )

    frontier = sorted((r["layout"], r["batch"]) for r in fitting if not dominated(r))
    assert sorted((r["layout"], r["batch"]) for r in rows if r["on_frontier"]) == frontier and len(frontier) >= 2
    con = duckdb.connect(str(site_db), read_only=True)
    points = con.sql("select * from sweep_points where sweep = ?", params=[SWEEP]).to_arrow_table()
    con.close()
    assert sorted((r["layout"], r["batch"]) for r in sweeps.pareto(points).to_pylist()) == frontier
    labels = page.page.evaluate(
        "() => Array.from(document.querySelectorAll('#chart-sweep svg text')).map((t) => t.textContent)"
    )
    assert sorted(t for t in labels if " · b" in t) == sorted(f"{layout} · b{batch}" for layout, batch in frontier)
    assert page.errors() == []


def test_a_saved_sweep_is_stale_after_its_model_is_built_again(site_db, tmp_path):
    copy = tmp_path / "store.duckdb"
    shutil.copyfile(site_db, copy)
    with duckdb.connect(str(copy)) as con:  # the build record of a later build of the model
        con.execute("insert into store_meta values ('x', now()::timestamp + interval 1 minute, [?])", [MODELS[0]])
    rows = queries.run("site_sweep_pareto", db=copy).to_pylist()
    assert rows and all(r["stale"] for r in rows)


@pytest.mark.parametrize(
    "name, part, how",
    [
        ("site_measured_vs_sol", "a kernel corpus", "archsql corpus import"),
        ("site_corpus_rejects", "a kernel corpus", "archsql corpus import"),
        ("site_sweep_pareto", "a saved sweep", "archsql sweep MODEL … --save NAME"),
    ],
)
def test_a_saved_query_of_an_absent_part_says_which_and_how_to_add_it(corpus_db, site_db, name, part, how):
    db = corpus_db if name == "site_sweep_pareto" else site_db  # neither has that part
    result = CliRunner().invoke(cli, ["--db", str(db), "query", name])
    assert result.exit_code == 2, result.output
    assert f"saved query '{name}' reads" in result.output and f"which only a store with {part} has" in result.output
    assert how in result.output and "Traceback" not in result.output and "Catalog Error" not in result.output


def test_a_query_of_an_absent_part_says_which(site_db):
    """`archsql sql` over a corpus view of a store without a corpus: the part, not DuckDB's error;
    a relation no part brings is still DuckDB's message (with its suggestion)."""
    result = CliRunner().invoke(cli, ["--db", str(site_db), "sql", "select count(*) from measured_vs_sol"])
    assert result.exit_code == 2 and "the query reads measured_vs_sol, which only a store with a kernel corpus" in (
        result.output
    )
    assert "archsql corpus import" in result.output and "Catalog Error" not in result.output
    result = CliRunner().invoke(cli, ["--db", str(site_db), "sql", "select count(*) from no_such_view"])
    assert result.exit_code == 2 and "does not exist" in result.output and "Traceback" not in result.output


def test_a_missing_part_is_said_not_drawn_empty(opened, site, site_db):
    """The encoder keeps no cache: its inspector says so, and the gallery's cache plot, filtered
    to it, says there is nothing to plot instead of drawing empty axes."""
    assert rows_of("site_caches", site_db, CHECKPOINTED) == rows_of("site_kv_curve", site_db, CHECKPOINTED) == []
    page = opened(site, f"model/{slug(CHECKPOINTED)}.html")
    assert "keeps no cache" in page.page.inner_text("#fig-caches .empty")
    assert page.page.locator("#table-caches").count() == 0
    page = opened(site, "index.html")
    assert not page.page.is_visible("#fig-kv_curve .empty")
    page.change(lambda: page.page.fill("#filter-model", "minilm"))
    assert page.page.is_visible("#fig-kv_curve .empty") and not page.page.is_visible("#chart-kv_curve")
    assert page.page.is_visible("#chart-params")  # the encoder has parameters to plot
    assert page.errors() == []
    page.change(lambda: page.page.fill("#filter-model", ""))  # as it was
    # no sweep of Mistral is saved: its explorer says so, and how to save one
    page = opened(site, f"deploy/{slug(MODELS[1])}.html")
    assert page.page.is_visible("#fig-sweep .empty") and not page.page.is_visible("#chart-sweep")
    assert "--save NAME" in page.page.inner_text("#fig-sweep .empty")


def test_page_data_are_the_query_rows(site, site_db):
    """The data file of a page holds the query's rows as they are (no number made on the way)."""
    text = (site / "data" / "gallery.js").read_text()
    payload = json.loads(text.removeprefix("ARCHSQL.load(").removesuffix(");\n"))
    table = payload["data"]["site_gallery"]
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    expected = rows_of("site_gallery", site_db)
    assert [list(r) for r in rows] == [list(r) for r in expected]
    assert same([list(r.values()) for r in rows], [list(r.values()) for r in expected])


# ---------------------------------------------------------------------------- roofline roofs


# ---------------------------------------------------------------------------- measured kernels, corpus browser

# Llama-3.1-8B's q_proj and o_proj in prefill_2k on one H200 are GEMMs m = 2048 tokens,
# n = 32 heads · 128 = 4096, k = 4096 (config hidden_size 4096): 2·2048·4096·4096 = 6.872e10 FLOP,
# at 989e12 bf16 FLOP/s (archsql/gpus/gpus.csv) 69.49 µs of speed of light (their bytes,
# 2·(2048·4096 + 4096·4096 + 2048·4096) = 67.1 MB at 4.8e12 B/s, take 14 µs).  Measured at
# 100 µs: measured / SOL = 100 / 69.49 = 1.439, and its share of the roofline (MFU) 0.695.
# GEMM 1024³ in 50 µs: MFU 2·1024³ / 50e-6 / 989e12 = 0.0434.  Three rows are rejected.
CORPUS_CSV = (
    "op_kind,gpu,library,library_version,kernel,dtype,m,n,k,latency_ms",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,2048,4096,4096,0.1",  # line 2: q_proj, o_proj
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,2048,4096,4096,abc",  # line 3: not a number
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,1024,1024,1024,0.05",  # line 4: a shape Llama does not run
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,8192,8192,8192,0.05",  # line 5: MFU 22 > 1
    "gem,H200 SXM,vllm,0.24.0,cutlass,bf16,64,64,64,0.01",  # line 6: unknown op kind
)


@pytest.fixture(scope="module")
def corpus_db(store_of, tmp_path_factory) -> Path:
    """Llama on two deployments and three workloads with the small corpus above imported."""
    from archsql.kernel_corpus import import_files
    from archsql.store import keep_deployments, refresh_store

    tmp = tmp_path_factory.mktemp("corpus-site")
    db = tmp / "store.duckdb"
    shutil.copyfile(store_of(MODELS[0]), db)
    with duckdb.connect(str(db)) as con:
        keep_deployments(con, ["1xH200-single", "8xH200-tp8"])
        con.execute("delete from workloads where workload not in ('prefill_2k', 'decode_b1_c2k', 'decode_b64_c2k')")
    refresh_store(db)
    (tmp / "sweep.csv").write_text("\n".join(CORPUS_CSV) + "\n", encoding="utf-8")
    (outcome,) = import_files(db, [tmp / "sweep.csv"]).outcomes
    assert (outcome.rows_read, outcome.rows_kept, outcome.rows_rejected) == (5, 2, 3)
    return db


@pytest.fixture(scope="module")
def corpus_site(corpus_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus-site-out") / "site"
    result = CliRunner().invoke(cli, ["--db", str(corpus_db), "site", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_explorer_shows_measured_over_sol_where_the_corpus_has_rows(opened, corpus_site, corpus_db):
    import archsql.kernel_corpus  # noqa: F401  (points kernel_corpus at the store's folder)

    page = opened(corpus_site, f"deploy/{slug(MODELS[0])}.html")
    page.change(lambda: page.page.select_option("#filter-deployment", "1xH200-single"))
    page.change(lambda: page.page.select_option("#filter-workload", "prefill_2k"))
    plotted = page.chart_rows("measured")
    assert sorted((r["uid"], r["policy"]) for r in plotted) == [
        ("decoder/dense/self_attn.o_proj", "envelope"),
        ("decoder/dense/self_attn.o_proj", "framework"),
        ("decoder/dense/self_attn.q_proj", "envelope"),
        ("decoder/dense/self_attn.q_proj", "framework"),
    ]
    for r in plotted:  # each GEMM launches once per layer: 32 layers (config num_hidden_layers)
        assert r["launches"] == 32 and math.isclose(r["sol_s"], 32 * 2 * 2048 * 4096**2 / 989e12, rel_tol=1e-9)
        assert math.isclose(r["measured_s"], 32 * 1e-4) and math.isclose(r["measured_over_sol"], 1.43918, rel_tol=1e-5)
    cols = ("uid", "policy", "measured_with", "sol_s", "measured_s")
    expected = [
        r
        for r in rows_of("site_measured_vs_sol", corpus_db, MODELS[0])
        if (r["deployment"], r["workload"]) == ("1xH200-single", "prefill_2k")
    ]
    assert same(sorted(key(r, *cols) for r in plotted), sorted(key(r, *cols) for r in expected))
    page.change(lambda: page.page.select_option("#filter-workload", "decode_b1_c2k"))  # m = 1: no row of it
    assert page.page.is_visible("#fig-measured .empty") and "speed of light only" in page.page.inner_text(
        "#fig-measured .empty"
    )
    assert page.errors() == []


def test_corpus_browser_shows_coverage_efficiency_and_rejects(opened, corpus_site, corpus_db):
    import archsql.kernel_corpus  # noqa: F401

    page = opened(corpus_site, "corpus.html")
    assert page.errors() == []
    for figure in CORPUS.figures:
        expected = rows_of(figure.source, corpus_db)
        cols = tuple(c.name for c in figure.columns)
        cells = page.cells(f"table-{figure.id}")
        assert same([tuple(c[n][0] for n in cols) for c in cells], [key(r, *cols) for r in expected]), figure.id
        if figure.chart:
            assert same(
                sorted(key(r, *cols) for r in page.chart_rows(figure.id)), sorted(key(r, *cols) for r in expected)
            )
    (coverage,) = rows_of("site_corpus_coverage", corpus_db)
    assert key(coverage, "op_kind", "gpu", "library", "measurements") == ("gemm", "H200 SXM", "vllm", 2)
    (kernel,) = rows_of("site_corpus_efficiency", corpus_db)  # MFU 0.695 and 0.0434 (derivation above)
    assert math.isclose(kernel["highest"], 2 * 2048 * 4096**2 / 1e-4 / 989e12, rel_tol=1e-9)
    assert math.isclose(kernel["lowest"], 2 * 1024**3 / 5e-5 / 989e12, rel_tol=1e-9)
    rejects = rows_of("site_corpus_rejects", corpus_db)
    assert sorted((r["field"], r["first_location"].rsplit(":", 1)[1]) for r in rejects) == [
        ("latency_ms", "3"),
        ("latency_us", "5"),
        ("op_kind", "6"),
    ]
    assert any("implied MFU" in r["reason"] for r in rejects)


def test_a_store_without_a_corpus_says_so(opened, site):
    page = opened(site, "corpus.html")
    for figure in CORPUS.figures:
        assert page.page.is_visible(f"#fig-{figure.id} .empty"), figure.id
    assert "has no kernel corpus" in page.page.inner_text("#fig-coverage .empty")
    page = opened(site, f"deploy/{slug(MODELS[0])}.html")
    assert "speed of light only" in page.page.inner_text("#fig-measured .empty")
    assert page.page.is_visible("#fig-measured .empty") and page.errors() == []


def test_roofline_roofs_are_the_gpu_peaks(site_db):
    """H200 SXM in archsql/gpus/gpus.csv: 4.8 TB/s HBM, 989 dense bf16 TFLOP/s, so the ridge is
    989e12 / 4.8e12 = 206.04 FLOP/byte.  Each roof is three points (memory roof's left end, the
    ridge, the compute roof's right end) and every op point lies on or under its roof."""
    model, deployment = "Meta-Llama-3.1-8B", "8xH200-tp8"
    roofs = [r for r in rows_of("site_roofline_roofs", site_db, model) if r["deployment"] == deployment]
    bf16 = [r for r in roofs if r["roof"] == "bf16 roof"]
    assert bf16 and {r["point"] for r in bf16} == {1, 2, 3}
    ridge = next(r for r in bf16 if r["point"] == 2)
    assert math.isclose(ridge["arithmetic_intensity"], 989e12 / 4.8e12) and ridge["flops_per_s"] == 989e12
    for r in bf16:
        assert math.isclose(r["flops_per_s"], min(989e12, 4.8e12 * r["arithmetic_intensity"]))
    span = [r["arithmetic_intensity"] for r in roofs]  # the roofs span every workload's ops
    points = [r for r in rows_of("site_roofline", site_db, model) if r["deployment"] == deployment]
    assert len({p["workload"] for p in points}) > 1
    for p in points:  # attained ≤ min(peak, bandwidth × intensity), and inside the drawn span
        assert p["flops_per_s"] <= min(p["peak_flops_per_s"] or 989e12, 4.8e12 * p["arithmetic_intensity"]) * (1 + 1e-9)
        assert min(span) < p["arithmetic_intensity"] < max(span)


def test_explorer_draws_the_roofs_of_the_selected_deployment(opened, site, site_db):
    model = "Meta-Llama-3.1-8B"
    page = opened(site, f"deploy/{slug(model)}.html")
    deployment = page.page.input_value("#filter-deployment")
    drawn = page.page.evaluate("() => ARCHSQL.views.roofline.data('site_roofline_roofs')")
    cols = ("roof", "point", "arithmetic_intensity", "flops_per_s")
    expected = [r for r in rows_of("site_roofline_roofs", site_db, model) if r["deployment"] == deployment]
    assert len(expected) >= 3 and same(sorted(key(r, *cols) for r in drawn), sorted(key(r, *cols) for r in expected))


# ---------------------------------------------------------------------------- archsql report

REPORT = ("Meta-Llama-3.1-8B", "8xH200-tp8")


@pytest.fixture(scope="module")
def report_html(site_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "llama.html"
    args = ["--db", str(site_db), "report", REPORT[0], "--deployment", REPORT[1], "--format", "html", "--out"]
    result = CliRunner().invoke(cli, [*args, str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote the html report of {REPORT[0]} on {REPORT[1]} to {out}" in result.output
    return out


def report_expected(site_db: Path, figure, workload: str) -> list[dict]:
    """The rows the explorer shows for the report's deployment (and workload, where filtered)."""
    if figure.needs == "measured_vs_sol":  # no kernel corpus in this store
        return []
    rows = rows_of(figure.source, site_db, REPORT[0])
    chosen = {"deployment": REPORT[1], "workload": workload}
    return [r for r in rows if all(r[f] == chosen[f] for f in figure.filters if f in chosen)]


@pytest.mark.parametrize(
    "args, message, hint",
    [
        (["Llama-3.1-8B", "-d", "8xH200-tp8"], "model 'Llama-3.1-8B' is not in the store", "Meta-Llama-3.1-8B"),
        (["Meta-Llama-3.1-8B", "-d", "8xH200-tp"], "deployment '8xH200-tp' is not in the store", "8xH200-tp8"),
        (["Meta-Llama-3.1-8B", "-d", "8xH200-tp8", "-w", "decode_b1_c2"], "workload 'decode_b1_c2'", "decode_b1_c2k"),
    ],
)
def test_report_unknown_names_are_located(site_db, tmp_path, args, message, hint):
    result = CliRunner().invoke(cli, ["--db", str(site_db), "report", *args, "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2, result.output
    assert message in result.output and f"did you mean '{hint}'?" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "r.html").exists()


def test_report_html_is_one_file_showing_the_query_rows(browser, report_html, site_db):
    """No file or network is fetched (every request other than the page itself is aborted and
    counted); the charts plot and the tables show the explorer's rows for the deployment."""
    text = report_html.read_text()
    assert "<script src=" not in text and '<link rel="stylesheet"' not in text
    page = browser.new_page()
    fetched: list[str] = []

    def block(route):
        if route.request.url != report_html.resolve().as_uri():
            fetched.append(route.request.url)
            return route.abort()
        return route.continue_()

    page.route("**/*", block)
    wrapped = Page.__new__(Page)
    wrapped.page, wrapped.messages = page, []
    page.on("console", lambda m: wrapped.messages.append((m.type, m.text)))
    page.on("pageerror", lambda e: wrapped.messages.append(("pageerror", str(e))))
    page.goto(url(report_html.parent, report_html.name))
    wrapped.wait(1)
    assert fetched == [] and wrapped.errors() == []
    workload = page.evaluate("() => document.getElementById('report-context').dataset.workload")
    assert page.evaluate("() => ARCHSQL.views.pareto.signal('chosen_deployment')") == REPORT[1]
    # without --workload the roofline's is the explorer's first for the deployment
    roofline = [r for r in rows_of("site_roofline", site_db, REPORT[0]) if r["deployment"] == REPORT[1]]
    assert workload == roofline[0]["workload"]
    for figure in DEPLOY.figures:
        expected = report_expected(site_db, figure, workload)
        if figure.needs and not expected:  # this store has no kernel corpus: the figure says so
            assert page.is_visible(f"#fig-{figure.id} .empty") and not page.locator(f"#chart-{figure.id}").count()
            continue
        cols = tuple(c.name for c in figure.columns)
        plotted = page.evaluate(
            "(id) => ARCHSQL.views[id] ? ARCHSQL.views[id].data(ARCHSQL.specs[id].data.name) : []", figure.id
        )
        assert expected, figure.id  # every other explorer figure has rows for Llama on 8×H200 tp8
        assert same(sorted(key(r, *cols) for r in plotted), sorted(key(r, *cols) for r in expected)), figure.id
        cells = wrapped.cells(f"table-{figure.id}")
        assert same(sorted(tuple(c[n][0] for n in cols) for c in cells), sorted(key(r, *cols) for r in expected))
    page.close()


def test_report_md_has_the_tables_and_svg_charts(site_db, tmp_path):
    out = tmp_path / "llama.md"
    args = ["--db", str(site_db), "report", *REPORT[:1], "-d", REPORT[1], "--workload", "decode_b64_c8k"]
    result = CliRunner().invoke(cli, [*args, "--format", "md", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "roofline at workload **decode_b64_c8k**" in text
    for figure in DEPLOY.figures:
        if figure.needs and not report_expected(site_db, figure, "decode_b64_c8k"):  # no kernel corpus here
            assert f"> {figure.empty}" in text and not (tmp_path / "llama_files" / f"{figure.id}.svg").exists()
            continue
        svg = tmp_path / "llama_files" / f"{figure.id}.svg"
        assert f"![{figure.title}](llama_files/{figure.id}.svg)" in text and svg.read_text().startswith("<svg")
        section = text.split(f"## {figure.title}\n", 1)[1].split("\n## ", 1)[0]
        table = [line for line in section.splitlines() if line.startswith("| ")]
        expected = report_expected(site_db, figure, "decode_b64_c8k")
        assert len(table) == 2 + len(expected), figure.id  # header, alignment, one line per row
        first = [show(expected[0][c.name], c) for c in figure.columns]
        assert table[2] == "| " + " | ".join(first) + " | ", figure.id
        assert queries.text(figure.source).splitlines()[0] in section  # its SQL


def test_report_pdf_is_printed_by_chromium(site_db, tmp_path):
    if chromium() is None:  # the same lookup as archsql.site.report.chromium
        pytest.skip("no chromium on this machine (apt-get install chromium; .ci/run installs it)")
    out = tmp_path / "llama.pdf"
    args = ["--db", str(site_db), "report", REPORT[0], "-d", REPORT[1], "--format", "pdf", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data.startswith(b"%PDF-") and f"archsql report: {REPORT[0]} on {REPORT[1]}".encode() in data
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", data)) >= 2  # page objects: the tables run over pages
