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
from archsql.store import DERIVED, connect, freshness, insert_rows, keep_deployments, refresh
from archsql.views import VIEWS_DIR, create_views

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


def _norm(value):
    """A value with floats to 10 significant digits: the derived rows and the live view may
    sum in another order (parallel aggregation), which moves the last bits."""
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.10g}")
    if isinstance(value, list | tuple):
        return tuple(_norm(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
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
    for name in materialized:
        derived = _rows(live, f'select * from {DERIVED}."{name}"')
        assert derived == _rows(live, f'select * from "{name}"'), name
    assert len(_rows(live, "select * from step_sol")) == 2 * 2  # deployments x workloads, one model
    # an int view that only feeds one report is not stored: through store.connect it is
    # computed from the stored views it reads, and gives the live rows too
    con = connect(db)
    transient = {"int_device_activations", "int_device_shapes"}
    assert not transient & set(materialized)
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


def test_a_parameter_change_through_a_raw_connection_is_never_read_stale(models_db, tmp_path):
    """Materialized rows, then the GPU's HBM bandwidth doubled through plain SQL: store.connect
    must read the new figure (memory_s halves: bytes / bandwidth), never the cached one."""
    db = _copy(models_db, tmp_path)
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


def test_a_writable_connection_reads_live_views_so_its_own_writes_show(store_of, tmp_path):
    """A write through a writable store connection, raw SQL or archsql's helpers, is read back
    on that connection: it is never shadowed by the derived tables."""
    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path)
    con = connect(db, read_only=False)
    assert _shadowed(con) == set()
    (before,) = con.execute("select count(*) from step_sol").fetchone()
    (deployments,) = con.execute("select count(*) from deployments").fetchone()
    con.execute("delete from workloads where workload = 'prefill_1'")  # one workload fewer
    assert con.execute("select count(*) from step_sol").fetchone()[0] == before - deployments
    con.close()


_EMPTY_TABLE_ROWS = {
    "workload_images": {"workload": WORKLOAD, "image_patches": 256},
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


def test_a_view_recreated_with_other_sql_makes_the_derived_tables_stale(store_of, tmp_path):
    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path)
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
    assert freshness(con).fresh  # the sweep's rows were rolled back: the store is as built
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


def test_cli_says_when_it_reads_live_views_and_refresh_makes_them_current(store_of, tmp_path):
    from click.testing import CliRunner

    from archsql.cli import cli

    db = _copy(store_of("Meta-Llama-3.1-8B"), tmp_path)
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
