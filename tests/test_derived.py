"""The store's derived tables (archsql.store): the rows of every int/reports view computed once
at build, read by ``store.connect`` only while a fingerprint of their inputs still matches.

Ground truth here is the live view (the SQL the derived rows are a cache of, read through a
plain DuckDB connection, which never sees the derived tables) and, for the stale-read test,
the bandwidth law of a memory-bound step: memory time = bytes moved / HBM bandwidth, so
doubling the GPU's bandwidth halves ``memory_s``.
"""

from __future__ import annotations

import json
import math
import shutil

import duckdb
import pytest

from archsql import api
from archsql.schema.tables import PARAMETER_TABLES
from archsql.store import DERIVED, connect, freshness, insert_rows, keep_deployments, refresh, write_checkpoint
from archsql.views import VIEWS_DIR, computed_once, create_views

MODEL = "DeepSeek-V3"
DEPLOYMENT = "8xH200-tp8-ep8-wfp8"
WORKLOAD = "decode_b64_c2k"
POINT = f"""
select s.time_s, s.memory_s, m.total_bytes
from step_sol as s join device_memory as m using (model, deployment, workload)
where s.model = '{MODEL}' and s.deployment = '{DEPLOYMENT}' and s.workload = '{WORKLOAD}'
"""


def _copy(src, tmp_path, name="store.duckdb"):
    db = tmp_path / name
    shutil.copy(src, db)
    return db


def _shadowed(con) -> set[str]:
    rows = con.execute("select view_name from duckdb_views() where database_name = 'temp'").fetchall()
    return {r[0] for r in rows}


def _norm(value, digits: int = 10):
    """A value with floats to 10 significant digits: the derived rows and the live view may
    sum in another order (parallel aggregation), which moves the last bits."""
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.{digits}g}")
    if isinstance(value, list | tuple):
        return tuple(_norm(v, digits) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v, digits)) for k, v in value.items()))
    return value


def _rows(con, sql):
    return sorted((tuple(_norm(v) for v in row) for row in con.execute(sql).fetchall()), key=repr)


# ------------------------------------------------------------------ the derived rows are the view's


def test_every_derived_table_holds_its_views_live_rows(store_of, tmp_path):
    """Every materialized view: the derived table's rows equal the live view's (a plain
    connection), on a one-model store cut to two deployments and two workloads."""
    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path)
    with duckdb.connect(str(db)) as con:
        keep_deployments(con, ["8xH200-tp8", "1xH200-single"])
        con.execute("delete from workloads where workload not in ('decode_b64_c2k', 'prefill_2k')")
        materialized = refresh(con)
    assert {"step_sol", "device_memory", "op_sol", "int_device_op_values"} <= set(materialized)
    live = duckdb.connect(str(db), read_only=True)  # never sees the derived tables
    with computed_once(live):  # each view computed once, from the live rows of those it reads
        for name in materialized:
            derived = _rows(live, f'select * from {DERIVED}."{name}"')
            assert derived == _rows(live, f'select * from main."{name}"'), name
    assert len(_rows(live, "select * from step_sol")) == 2 * 2  # deployments x workloads, one model
    # an int view that only feeds one report and whose sidecar says `stored: false` is not
    # stored: through store.connect it is computed from the stored views it reads, and gives
    # the live rows too; a private step without it (few rows, slow to compute) is stored
    con = connect(db)
    transient = {"int_device_shapes"}
    assert not transient & set(materialized) and "int_device_activations" in materialized
    for name in transient:
        assert _rows(con, f'select * from "{name}"') == _rows(live, f'select * from "{name}"'), name
    con.close()
    live.close()


def test_a_built_store_is_read_through_its_derived_tables(models_db):
    con = connect(models_db)
    state = freshness(con)
    assert state.fresh
    assert {"step_sol", "device_memory"} <= _shadowed(con) == set(state.materialized)
    assert not any(n.startswith("base_") for n in state.materialized)  # base views stay live
    con.close()


# ------------------------------------------------------------------ never a stale figure


def test_a_parameter_change_through_a_raw_connection_is_never_read_stale(store_of, tmp_path):
    """Materialized rows, then the GPU's HBM bandwidth doubled through plain SQL: store.connect
    must read the new figure (memory_s halves: bytes / bandwidth), never the cached one."""
    db = _copy(store_of(MODEL), tmp_path)
    with duckdb.connect(str(db)) as raw:  # the point's deployment and workload: what POINT reads
        keep_deployments(raw, [DEPLOYMENT])
        raw.execute("delete from workloads where workload <> ?", [WORKLOAD])
        refresh(raw)
    con = connect(db)
    ((_, memory_s, total_bytes),) = con.execute(POINT).fetchall()
    assert "step_sol" in _shadowed(con)
    con.close()
    with duckdb.connect(str(db)) as raw:
        (gpu,) = raw.execute("select gpu from deployments where deployment = ?", [DEPLOYMENT]).fetchone()
        raw.execute("update gpus set mem_bandwidth_TBps = 2 * mem_bandwidth_TBps where gpu = ?", [gpu])

    con = connect(db)  # read-only: the fingerprint differs, so the live views
    assert not freshness(con).fresh
    assert _shadowed(con) == set()
    ((_, new_memory_s, new_total_bytes),) = con.execute(POINT).fetchall()
    con.close()
    assert new_memory_s == pytest.approx(memory_s / 2, rel=1e-12)
    assert new_total_bytes == total_bytes  # the bytes held do not depend on bandwidth

    api.refresh(db)  # computed again: read-only connections read them
    con = connect(db)
    assert freshness(con).fresh and "step_sol" in _shadowed(con)
    assert con.execute(POINT).fetchall()[0][1] == pytest.approx(memory_s / 2, rel=1e-12)
    con.close()
    assert api.query(POINT, db=db).column("memory_s")[0].as_py() == pytest.approx(memory_s / 2, rel=1e-12)


# The one-model store cut to two deployments and three workloads (``prefill_1``, which the
# tests below remove, among them), its derived rows computed: a test that writes a copy and
# reads views back computes them over this grid, not the whole default one.
SMALL_DEPLOYMENTS = ("8xH200-tp8", "1xH200-single")
SMALL_WORKLOADS = ("prefill_1", "prefill_2k", "decode_b64_c2k")


@pytest.fixture(scope="module")
def small_store(store_of, tmp_path_factory):
    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path_factory.mktemp("small"))
    with duckdb.connect(str(db)) as con:
        keep_deployments(con, SMALL_DEPLOYMENTS)
        con.execute("delete from workloads where workload not in (select unnest(?::varchar[]))", [SMALL_WORKLOADS])
        refresh(con)
    return db


def test_a_writable_connection_reads_live_views_so_its_own_writes_show(small_store, tmp_path):
    """A write through a writable store connection, raw SQL or archsql's helpers, is read back
    on that connection: it is never shadowed by the derived tables."""
    db = _copy(small_store, tmp_path)
    con = connect(db, read_only=False)
    assert _shadowed(con) == set()
    (before,) = con.execute("select count(*) from step_sol").fetchone()
    (deployments,) = con.execute("select count(*) from deployments").fetchone()
    con.execute("delete from workloads where workload = 'prefill_1'")  # one workload fewer
    assert con.execute("select count(*) from step_sol").fetchone()[0] == before - deployments
    con.close()


_EMPTY_TABLE_ROWS = {
    "workload_images": {"workload": WORKLOAD, "image_patches": 256},
    "deployment_flags": {"deployment": "1xH200-single", "flag": "enable_fi_allreduce_fusion", "enabled": True},
    "serving_cases": {
        "serving_case": "c1",
        "model": "Meta-Llama-3.1-8B",
        "deployment": "1xH200-single",
        "framework": "vllm",
        "version": "0.12.0",
        "isl": 128,
        "osl": 16,
        "concurrency": 1,
    },
}


@pytest.mark.parametrize("table", sorted(PARAMETER_TABLES))
def test_every_parameter_table_is_in_the_fingerprint(store_of, tmp_path, table):
    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path)
    with duckdb.connect(str(db)) as raw:
        assert freshness(raw).fresh
        (rows,) = raw.execute(f'select count(*) from "{table}"').fetchone()
        if rows:  # one row less
            raw.execute(f'delete from "{table}" where rowid = (select min(rowid) from "{table}")')
        else:  # one row more (the default store has no image workloads)
            insert_rows(raw, table, [_EMPTY_TABLE_ROWS[table]])
        assert not freshness(raw).fresh


def test_a_view_recreated_with_other_sql_makes_the_derived_tables_stale(small_store, tmp_path):
    db = _copy(small_store, tmp_path)
    views = tmp_path / "views"
    shutil.copytree(VIEWS_DIR, views)
    step_sol = views / "reports" / "step_sol.sql"
    step_sol.write_text(step_sol.read_text(encoding="utf-8") + "\n-- edited\n", encoding="utf-8")
    with duckdb.connect(str(db)) as raw:
        create_views(raw, VIEWS_DIR)  # the same SQL: still fresh
        assert freshness(raw).fresh
        create_views(raw, views)
        assert not freshness(raw).fresh


def test_a_sweep_reads_its_own_grid_not_the_derived_rows(models_db, tmp_path):
    from archsql import sweep as sweeps

    db = _copy(models_db, tmp_path)
    deployments, workloads = sweeps.grid(["H200 SXM"], [8], batch=[64], context=[2048], degrees={"tp": [8]})
    table = sweeps.sweep("Meta-Llama-3.1-8B", db, deployments, workloads)
    assert table.num_rows == 1
    con = connect(db)
    assert freshness(con).fresh  # the sweep's grid lived in temporary tables: the store is as built
    con.close()


# ------------------------------------------------------------------ issue 13 acceptance


def _plan(con, sql, path) -> list[dict]:
    """Every operator of the executed plan of ``sql`` (DuckDB's JSON profile)."""
    con.execute("pragma enable_profiling = 'json'")
    con.execute(f"pragma profiling_output = '{path}'")
    con.execute(sql).fetchall()
    con.execute("pragma disable_profiling")
    with open(path, encoding="utf-8") as f:
        root = json.load(f)
    out, stack = [], list(root["operator"])
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.get("children", []))
    return out


def test_a_filtered_point_query_touches_only_its_rows(models_db, tmp_path):
    """Issue 13: a (model, deployment, workload) query reads the stored rows of step_sol and
    device_memory, filtered in the scan; no operator handles another model's (or another
    point's) rows, and nothing is evaluated from the evaluated tables."""
    con = connect(models_db)
    models = con.execute("select count(*) from models").fetchone()[0]
    assert models >= 2
    operators = _plan(con, POINT, tmp_path / "profile.json")
    scans = [op for op in operators if op["type"] == "TABLE_SCAN"]
    assert sorted(op["extra_info"]["Table"].split(".")[-1] for op in scans) == ["device_memory", "step_sol"]
    assert all(f".{DERIVED}." in op["extra_info"]["Table"] for op in scans)
    for op in operators:
        assert op["intermediate_rows"] <= 1, (op["name"], op["intermediate_rows"])
    stored = con.execute(f"select count(*) from {DERIVED}.step_sol").fetchone()[0]
    assert all(op["rows_scanned"] <= stored for op in scans)  # the stored rows, no product of them
    con.close()


# ------------------------------------------------------------------ the command line


def test_cli_says_when_it_reads_live_views_and_refresh_makes_them_current(small_store, tmp_path):
    from click.testing import CliRunner

    from archsql.cli import cli

    db = _copy(small_store, tmp_path)
    sql = "select count(*) as n from step_sol"
    fresh = CliRunner().invoke(cli, ["--db", str(db), "sql", sql, "--format", "csv"])
    assert fresh.exit_code == 0 and "note:" not in fresh.stderr
    with duckdb.connect(str(db)) as raw:
        raw.execute("delete from workloads where workload = 'prefill_1'")
    stale = CliRunner().invoke(cli, ["--db", str(db), "sql", sql, "--format", "csv"])
    assert stale.exit_code == 0
    note = " ".join(stale.stderr.split())  # the note wraps at the terminal's width
    assert "do not match its parameter tables" in note and "archsql refresh" in note
    # one workload fewer: the live count, not the stored one
    deployments = duckdb.connect(str(db), read_only=True).execute("select count(*) from deployments").fetchone()[0]
    assert int(stale.stdout.split()[-1]) == int(fresh.stdout.split()[-1]) - deployments
    refreshed = CliRunner().invoke(cli, ["--db", str(db), "refresh"])
    assert refreshed.exit_code == 0 and "derived tables" in refreshed.stdout
    again = CliRunner().invoke(cli, ["--db", str(db), "sql", sql, "--format", "csv"])
    assert "note:" not in again.stderr and again.stdout == stale.stdout
    with connect(db) as con:
        assert freshness(con).fresh


# ------------------------------------------------------------------ incremental refresh

# A two-model store (a dense model and an MoE one) cut to three deployments (two GPUs, a
# tensor- and an expert-parallel mesh) and three workloads (prefill and two decodes): every
# kind of parameter write, then every derived table compared with its live view.
INCREMENTAL_MODELS = ("Meta-Llama-3.1-8B", "Qwen3-30B-A3B")
KEPT_DEPLOYMENTS = ("8xH200-tp8", "8xH200-tp8-ep8", "8xB200-tp8")
KEPT_WORKLOADS = ("prefill_2k", "decode_b64_c2k", "decode_b1_c8k")


@pytest.fixture(scope="module")
def cut_store(store_of, tmp_path_factory):
    db = _copy(store_of(*INCREMENTAL_MODELS), tmp_path_factory.mktemp("cut"))
    with duckdb.connect(str(db)) as con:
        keep_deployments(con, KEPT_DEPLOYMENTS)
        con.execute("delete from workloads where workload not in (select unnest(?::varchar[]))", [KEPT_WORKLOADS])
        refresh(con)
    return db


def _assert_derived_rows_are_the_live_rows(db) -> list[str]:
    """The store's derived tables are current (fingerprint) and hold, table by table, the rows
    their view gives live (a plain connection, each view computed once, from the tables)."""
    with connect(db) as con:
        assert freshness(con).fresh
        materialized = freshness(con).materialized
    live = duckdb.connect(str(db), read_only=True)  # never sees the derived tables
    try:
        with computed_once(live):
            for name in materialized:
                derived = _exact_rows(live, f'select * from {DERIVED}."{name}"')
                now = _exact_rows(live, f'select * from main."{name}"')
                assert len(derived) == len(now), (name, len(derived), len(now))
                for got, want in zip(derived, now, strict=True):
                    assert _same(got, want), (name, got, want)
    finally:
        live.close()
    return list(materialized)


def _exact_rows(con, sql) -> list[tuple]:
    """The rows, sorted on their values with floats to 6 digits (an order both sides share)."""
    return sorted(con.execute(sql).fetchall(), key=lambda row: repr(tuple(_norm(v, 6) for v in row)))


def _same(a, b) -> bool:
    """Equal, floats to 1e-12 relative: a sum taken in another order (DuckDB aggregates in
    parallel) moves the last bits, nothing more."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _llama_checkpoint(name: str):
    from tests.test_reconciliation import header_table, llama_tensors

    tensors = llama_tensors()
    del tensors["model.norm.weight"]  # one tensor missing: the reconciliation has a row to show
    return header_table(tensors, name)


# each write, and views that must (True) or must not (False) have been computed again
WRITES = {
    "deployment add": (
        lambda db: api.add_deployment("8xH200-tp4-dp2-ep8", db=db, gpu="H200 SXM", tp=4, dp=2, ep=8),
        {
            "step_sol": True,
            "device_memory": True,
            "int_deployment_axes": True,
            "model_summary": False,
            "flops": False,
            "int_gpu_specs": False,
        },
    ),
    "deployment replaced": (
        lambda db: api.add_deployment("8xH200-tp8", db=db, like="8xH200-tp8", kv_dtype="fp8", replace=True),
        {"step_sol": True, "int_deployment_axes": True, "flops": False},
    ),
    "deployment rm": (
        lambda db: api.remove_deployments(["8xH200-tp8-ep8"], db=db),
        {"step_sol": True, "kernel_sol": True, "kv_per_token": False},
    ),
    "workload add": (
        lambda db: api.add_workload("decode_b8_c4k", db=db, phase="decode", batch=8, context=4096),
        {"step_sol": True, "flops": True, "int_deployment_axes": False, "int_device_terms": False},
    ),
    "workload add with images": (
        lambda db: api.add_workload("prefill_img", db=db, phase="prefill", context=1024, image_patches=256),
        {"step_sol": True, "int_workload_inputs": True, "model_summary": False},
    ),
    "workload rm": (
        lambda db: api.remove_workloads(["decode_b1_c8k"], db=db),
        {"step_sol": True, "int_device_terms": False},
    ),
    "gpu add, on no deployment": (
        lambda db: api.add_gpu("H200 test", db=db, like="H200 SXM", sources="test row"),
        {"int_gpu_specs": True, "step_sol": False, "int_device_terms": False},
    ),
    "gpu replaced, under two deployments": (
        lambda db: api.add_gpu(
            "H200 SXM", db=db, like="H200 SXM", replace=True, sources="test", mem_bandwidth_TBps=9.6
        ),
        {"int_gpu_specs": True, "step_sol": True, "model_summary": False},
    ),
    "checkpoint written": (
        lambda db: write_checkpoint(db, _llama_checkpoint("ck"), model="Meta-Llama-3.1-8B"),
        {"checkpoint_reconciliation": True, "step_sol": False},
    ),
    "model added": (
        lambda db: api.build(["Qwen3-0.6B"], db=db),
        {"model_summary": True, "step_sol": True, "int_deployment_axes": False, "int_gpu_specs": False},
    ),
    "model rebuilt": (
        lambda db: api.build(["Meta-Llama-3.1-8B"], db=db),
        {"model_summary": True, "step_sol": True, "int_deployment_axes": False},
    ),
    # a writer that gives whole parameter tables (the design commands): the same rows as the
    # store's move no digest, so only the model's rows are computed
    "model added, with the store's own workloads given": (
        lambda db: _write_model_with_workloads(db, "Qwen3-0.6B", _stored_workloads(db)),
        {"model_summary": True, "step_sol": True, "int_deployment_axes": False, "int_gpu_specs": False},
    ),
}


def _stored_workloads(db):
    with connect(db) as con:
        return con.sql("select * from main.workloads order by workload desc").to_arrow_table()


def _write_model_with_workloads(db, model, workloads):
    from archsql.store import write_store

    tables, _ = api.evaluate_all([model])
    write_store(db, {**tables, "workloads": workloads})


@pytest.mark.parametrize("kind", list(WRITES))
def test_after_each_kind_of_write_only_its_rows_are_computed_and_all_equal_the_live_views(
    cut_store, tmp_path, monkeypatch, kind
):
    import archsql.parameters
    import archsql.store

    db = _copy(cut_store, tmp_path)
    write, expected = WRITES[kind]
    computed: list[list[str]] = []
    incremental = archsql.store.refresh_changed

    def recorded(*args, **kwargs):
        computed.append(incremental(*args, **kwargs))
        return computed[-1]

    def full(con):
        raise AssertionError(f"{kind}: the whole derived schema was computed again")

    monkeypatch.setattr(archsql.store, "refresh_changed", recorded)
    monkeypatch.setattr(archsql.parameters, "refresh_changed", recorded)
    monkeypatch.setattr(archsql.store, "refresh", full)
    write(db)
    monkeypatch.undo()
    assert len(computed) == 1
    for view, again in expected.items():
        assert (view in computed[0]) is again, (kind, view, computed[0])
    _assert_derived_rows_are_the_live_rows(db)


def test_a_write_after_a_raw_sql_change_computes_everything_again(cut_store, tmp_path, monkeypatch):
    """Derived rows already stale (a GPU figure changed by SQL) when a deployment is added:
    computing only the new deployment's rows would keep the stale ones, so all are computed."""
    import archsql.store

    db = _copy(cut_store, tmp_path)
    with duckdb.connect(str(db)) as raw:
        raw.execute("update gpus set mem_bandwidth_TBps = 2 * mem_bandwidth_TBps where gpu = 'B200 (HGX/DGX B200)'")
    full_refreshes = []
    whole = archsql.store.refresh

    def counted(con):
        full_refreshes.append(1)
        return whole(con)

    monkeypatch.setattr(archsql.store, "refresh", counted)
    api.add_workload("decode_b8_c4k", db=db, phase="decode", batch=8, context=4096)
    monkeypatch.undo()
    assert full_refreshes == [1]
    _assert_derived_rows_are_the_live_rows(db)


def test_a_model_written_with_other_parameter_rows_computes_everything_again(cut_store, tmp_path, monkeypatch):
    """A writer giving a whole workloads table with one row fewer: every derived row of every
    model reads the workloads, so all are computed (not only the written model's)."""
    import archsql.store

    db = _copy(cut_store, tmp_path)
    full_refreshes = []
    whole = archsql.store.refresh

    def counted(con):
        full_refreshes.append(1)
        return whole(con)

    workloads = _stored_workloads(db)
    monkeypatch.setattr(archsql.store, "refresh", counted)
    _write_model_with_workloads(db, "Qwen3-0.6B", workloads.slice(1))
    monkeypatch.undo()
    assert full_refreshes == [1]
    _assert_derived_rows_are_the_live_rows(db)


def test_a_failed_write_leaves_the_derived_tables_current(cut_store, tmp_path):
    from archsql.errors import ParameterError

    db = _copy(cut_store, tmp_path)
    with pytest.raises(ParameterError):
        api.add_deployment("bad", db=db, gpu="H200 SXM", tp=3, gpus=8)  # 3 does not divide 8
    _assert_derived_rows_are_the_live_rows(db)


# ------------------------------------------------------------------ export


def _parquet_rows(con, path) -> list[tuple]:
    return _exact_rows(con, f"select * from read_parquet('{path}')")


@pytest.mark.parametrize("stale", [False, True])
def test_export_writes_every_relation_with_its_live_rows(cut_store, tmp_path, stale):
    """Fresh: stored views copied, a view private to one report computed from them; stale (a
    GPU's bandwidth doubled by SQL): every view computed from the tables.  Either way each
    file holds the rows the view gives live, and progress is told once per file."""
    db = _copy(cut_store, tmp_path)
    if stale:
        with duckdb.connect(str(db)) as raw:
            raw.execute("update gpus set mem_bandwidth_TBps = 2 * mem_bandwidth_TBps where gpu = 'H200 SXM'")
    seen = []
    files = api.export_parquet(tmp_path / "out", db=db, progress=lambda name, done, total: seen.append((done, total)))
    live = duckdb.connect(str(db), read_only=True)
    try:
        relations = {
            r[0]
            for r in live.execute(
                "select table_name from information_schema.tables where table_schema = 'main'"
            ).fetchall()
        }
        assert set(files.column("name").to_pylist()) == relations
        assert seen == [(i, len(relations)) for i in range(1, len(relations) + 1)]
        rows = dict(zip(files.column("name").to_pylist(), files.column("rows").to_pylist(), strict=True))
        with computed_once(live):
            for name in relations:
                assert rows[name] == live.execute(f'select count(*) from "{name}"').fetchone()[0], name
            # stored (step_sol), private to one report and not stored (int_device_shapes), a table
            for name in ("step_sol", "int_device_shapes", "gpus"):
                exported = _parquet_rows(live, tmp_path / "out" / f"{name}.parquet")
                now = _exact_rows(live, f'select * from main."{name}"')
                assert len(exported) == len(now) and all(map(_same, exported, now)), name
    finally:
        live.close()


# ------------------------------------------------------------------ sweeps


def test_a_sweep_reads_the_stored_rows_its_grid_cannot_change_and_answers_as_the_live_views(
    cut_store, tmp_path, monkeypatch
):
    """A sweep on a fresh store reads the model-only views (no deployment or workload table
    under them) from the derived rows; the same sweep on a store whose derived tables are
    stale computes every view live: the answers are the same."""
    import archsql.store
    from archsql import sweep as sweeps

    deployments, workloads = sweeps.grid(
        ["H200 SXM", "B200 (HGX/DGX B200)"], [8], batch=[1, 64], context=[2048, 8192], degrees={"tp": [2, 8]}
    )
    reused: list[list[str]] = []
    reuse = archsql.store.reuse_derived

    def recorded(*args, **kwargs):
        reused.append(reuse(*args, **kwargs))
        return reused[-1]

    monkeypatch.setattr(archsql.store, "reuse_derived", recorded)
    fresh_db = _copy(cut_store, tmp_path, "fresh.duckdb")
    fast = sweeps.sweep("Qwen3-30B-A3B", fresh_db, deployments, workloads)
    assert reused and {"int_routed_experts", "int_template_layers", "int_gpu_specs"} <= set(reused[0])
    assert not {"step_sol", "device_memory", "int_device_terms"} & set(reused[0])

    stale_db = _copy(cut_store, tmp_path, "stale.duckdb")
    with duckdb.connect(str(stale_db)) as raw:  # a framework no deployment uses: the answers stay
        raw.execute("insert into frameworks select 'unused-framework', * exclude (framework) from frameworks limit 1")
        assert not freshness(raw).fresh
    live = sweeps.sweep("Qwen3-30B-A3B", stale_db, deployments, workloads)
    assert len(reused) == 1  # the stale store reused nothing
    assert fast.num_rows == live.num_rows == 2 * 2 * 2 * 2  # GPUs x tp degrees x batches x contexts
    assert fast.column_names == live.column_names
    for got, want in zip(fast.to_pylist(), live.to_pylist(), strict=True):
        assert _same(got, want), (got, want)


# ------------------------------------------------------------------ a query shadows what it reaches


def test_a_query_shadows_only_the_stored_views_it_reaches(cut_store):
    """api.query shadows the derived tables its query reaches (store.use_derived with the
    names DuckDB's parser finds): a stored view itself; under a view that is not stored, the
    stored views it reads; every one when a name is unknown (a CTE).  Each answers with the
    live view's rows."""
    from archsql.store import use_derived

    def shadowed_for(reads):
        con = connect(cut_store, derived=False)
        try:
            use_derived(con, cut_store, reads)
            return _shadowed(con), freshness(con).materialized
        finally:
            con.close()

    assert shadowed_for({"step_sol", "models"})[0] == {"step_sol"}
    under, materialized = shadowed_for({"int_device_shapes"})  # not stored: read live from these
    assert "int_device_shapes" not in under and {"int_deployment_groups", "int_workload_inputs"} <= under
    assert shadowed_for({"a_cte"})[0] == set(materialized)
    live = duckdb.connect(str(cut_store), read_only=True)
    try:
        for sql in ("select * from int_device_shapes", "with a as (select * from step_sol) select * from a"):
            got = api.query(sql, db=cut_store).to_pylist()
            want = [
                dict(zip([d[0] for d in live.description], row, strict=True)) for row in live.execute(sql).fetchall()
            ]
            key = lambda row: repr(_norm(tuple(row.values()), 6))  # noqa: E731
            assert len(got) == len(want) and all(map(_same, sorted(got, key=key), sorted(want, key=key))), sql
    finally:
        live.close()
