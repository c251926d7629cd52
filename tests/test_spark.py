"""The same views on Apache Spark (docs/spark.md): every view transpiles, the partitioned
Parquet dataset keeps the store's Arrow schemas, and on pyspark local mode every view's rows
equal DuckDB's on the same store (integers exact, floats to 1e-9 relative) — the FULL catalog
× default deployments × workloads — the sweep gives DuckDB's sweep rows, and measured_vs_sol
reads the corpus import's own Parquet partitions.

The Spark tests share ONE SparkSession (module fixture; the file runs on one xdist worker) and
run when asked for (``ARCHSQL_SPARK_TESTS=1``, with pyspark: ``pip install '.[spark]'``): the
full-catalog parity is minutes of Spark jobs, so CI runs this file as a step of its own after
the default suite (``.ci/run``).  Without it the Spark tests are skipped; the transpile and
export tests run everywhere.
"""

from __future__ import annotations

import json
import math
import os
import sys

import duckdb
import pyarrow.parquet as pq
import pytest
import sqlglot

from archsql.spark import parity
from archsql.spark.dataset import export_dataset, read_manifest, schema_of
from archsql.spark.transpile import macros, to_spark, view_dirs
from archsql.views import _live_schema, view_files


@pytest.fixture(scope="module")
def dataset(catalog_db, tmp_path_factory):
    """The full catalog's store (the session's shared one), exported."""
    out = tmp_path_factory.mktemp("spark") / "catalog"
    export_dataset(out, catalog_db)
    return out


@pytest.fixture(scope="module")
def small_store(store_of):
    """The one-model store ten other test files share (built once per run)."""
    return store_of("Meta-Llama-3.1-8B")


@pytest.fixture(scope="module")
def small_dataset(small_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("spark") / "small"
    export_dataset(out, small_store)
    return out


# A Spark session costs ~30 s of JVM start and the parity run minutes of Spark jobs on two
# loaded cores: the Spark tests run when asked for (ARCHSQL_SPARK_TESTS=1, with pyspark
# installed: pip install '.[spark]'), never silently inside the default suite.
needs_spark = pytest.mark.skipif(
    os.environ.get("ARCHSQL_SPARK_TESTS") != "1",
    reason="Spark tests: set ARCHSQL_SPARK_TESTS=1 (pip install '.[spark]')",
)


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from archsql.spark.engine import session

    s = session(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "4g",  # the most the JVM may take; the catalog's views need ~2
        }
    )
    yield s
    s.stop()


# -- transpiling (no Spark) ------------------------------------------------------------------


def test_every_view_transpiles_to_spark_sql(small_store):
    """Every view file of every folder gives Spark SQL that sqlglot's Spark parser reads back,
    with no DuckDB-only function left in it."""
    con = duckdb.connect(str(small_store), read_only=True)
    try:
        schema = _live_schema(con)
    finally:
        con.close()
    duckdb_only = {"list", "list_product", "list_sum", "product", "format", "unnest", "len", "error", "range"}
    duckdb_only |= set(macros())
    failures = []
    count = 0
    for folder in view_dirs():
        for f in view_files(folder):
            count += 1
            try:
                text = to_spark(f.sql, schema, file=str(f.path))
                tree = sqlglot.parse_one(text, dialect="spark")
            except Exception as exc:
                failures.append(f"{f.path}: {exc}")
                continue
            left = {fn.name.lower() for fn in tree.find_all(sqlglot.exp.Anonymous)} & duckdb_only
            if left:
                failures.append(f"{f.path}: DuckDB-only {sorted(left)} left in the Spark SQL")
    assert count > 100  # the store's views, the kernel corpus's and the design views
    assert not failures, "\n".join(failures)


def test_a_macro_call_is_inlined_with_its_defaults():
    """term_factor(factor, arg, s, c) leaves v to its default 0: the 'patches' branch reads
    power(0, arg); window_pairs is inlined inside term_factor (no macro call left)."""
    text = to_spark("select term_factor('patches', 2, 1, 8) as x")
    assert "term_factor(" not in text.lower() and "window_pairs(" not in text.lower()
    assert "POWER((0),(2))" in "".join(text.split())


def test_a_cast_of_a_fraction_rounds_half_to_even_as_duckdb():
    """DuckDB casts 2.5 to BIGINT as 2 and 3.5 as 4 (half to even); Spark truncates."""
    assert duckdb.sql("select 2.5::double::bigint, 3.5::double::bigint").fetchall() == [(2, 4)]
    assert "BROUND" in to_spark("select x::bigint from t").upper()


@pytest.mark.parametrize("schema", [None, {"corpus": {"op_kind": "varchar", "m": "bigint"}}])
def test_a_whole_row_to_json_is_a_struct_of_its_columns(schema):
    """DuckDB's to_json(c) of a table alias (int_kernel_measured_keys reads a corpus row's
    signature fields from it) is Spark's to_json(struct(c.*)), with or without the columns
    qualified against a schema (qualified, the alias is a TableColumn: Spark read it as a
    column named c and refused the view)."""
    text = to_spark("select to_json(c) as j from corpus as c", schema)
    assert "TO_JSON(STRUCT(c.*))" in "".join(text.split())


@pytest.mark.parametrize("hint", ["materialized", "not materialized"])
def test_a_cte_materialization_hint_is_dropped(hint):
    """DuckDB's `with x as [not] materialized (...)` (measured_vs_sol's kernel_sol step) is a
    plan hint with no Spark syntax: Spark refused the view at NOT."""
    text = to_spark(f"with x as {hint} (select 1 as a) select a from x")
    assert "MATERIALIZED" not in text.upper() and "WITH x AS (" in text


def test_list_resize_is_a_slice_padded_with_the_fill():
    """DuckDB's list_resize(l, n, fill) (the corpus's version_order macro) keeps the first n
    and pads with fill up to n; Spark has no such function."""
    assert duckdb.sql("select list_resize([1, 2, 3], 2, 0), list_resize([1], 3, 0)").fetchall() == [([1, 2], [1, 0, 0])]
    text = "".join(to_spark("select list_resize(l, 4, 0) as r from t").split()).upper()
    assert "LIST_RESIZE" not in text and "SLICE(L,1,4)" in text and "ARRAY_REPEAT(0,GREATEST(4-SIZE(L),0))" in text


# -- the dataset -----------------------------------------------------------------------------


def test_export_partitions_by_model_with_the_store_schemas(small_store, small_dataset):
    dataset = small_dataset
    manifest = read_manifest(dataset)
    assert manifest["archsql_version"]
    con = duckdb.connect(str(small_store), read_only=True)
    try:
        for name in ("terms", "nodes", "deployments"):
            entry = manifest["tables"][name]
            want = con.sql(f"select * from {name} limit 0").to_arrow_table().schema
            assert schema_of(entry) == want  # the Arrow schema is the contract, never re-inferred
            ((rows,),) = con.sql(f"select count(*) from {name}").fetchall()
            assert entry["rows"] == rows
    finally:
        con.close()
    terms = manifest["tables"]["terms"]
    assert terms["partition_by"] == ["model"]
    folders = sorted(p.name for p in (dataset / "terms").iterdir())
    assert folders == ["model=Meta-Llama-3.1-8B"]
    # a file holds one model's rows; the model column lives in the folder name (Hive style)
    part = next((dataset / "terms" / "model=Meta-Llama-3.1-8B").glob("*.parquet"))
    assert "model" not in pq.read_schema(part).names
    assert manifest["tables"]["deployments"]["partition_by"] == []
    assert json.loads((dataset / "manifest.json").read_text())["views"][0]["name"].startswith("base_")


def test_partition_by_an_unknown_column_is_a_located_error(small_store, tmp_path):
    from archsql.errors import QueryError

    with pytest.raises(QueryError, match="no table of the store has the column 'modle'") as info:
        export_dataset(tmp_path / "x", small_store, ("modle",))
    assert "model" in str(info.value)


# -- Spark ------------------------------------------------------------------------------------


def test_engine_spark_without_pyspark_names_the_extra(monkeypatch):
    from archsql.errors import EngineError
    from archsql.spark.engine import session

    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark fails as if not installed
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(EngineError, match=r"archsql\[spark\]"):
        session()


def test_engine_spark_without_a_dataset_says_how_to_write_one(tmp_path):
    from click.testing import CliRunner

    from archsql.cli import cli

    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "x.duckdb"), "sql", "--engine", "spark", "select 1"])
    assert result.exit_code == 2
    assert "archsql export --parquet DIR --partition-by model" in result.output


@needs_spark
def test_ranks_touched_spark_body_equals_the_duckdb_macro(spark):
    """The Spark body (no lgamma: a product) against DuckDB's lgamma form on a grid, and one
    hand value: DeepSeek-V3, 256 experts, top 8, over 8 ranks: 8·(1 − C(224, 8)/C(256, 8))."""
    grid = [(e, k, r) for e in (8, 64, 128, 256) for k in (1, 2, 8) for r in (1, 2, 8, 16, 64) if k <= e]
    values = ", ".join(f"({e}, {k}, {r})" for e, k, r in grid)
    sql = f"select e, k, r, ranks_touched(e, k, r) as x from (values {values}) as g(e, k, r)"
    from archsql.views import create_macros

    con = duckdb.connect()
    create_macros(con)
    want = {(e, k, r): x for e, k, r, x in con.execute(sql).fetchall()}
    got = {(row.e, row.k, row.r): row.x for row in spark.sql(to_spark(sql)).collect()}
    assert got.keys() == want.keys()
    for key, x in want.items():
        assert math.isclose(got[key], x, rel_tol=1e-9), key
    hand = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert math.isclose(got[(256, 8, 8)], hand, rel_tol=1e-12)


@needs_spark
def test_every_view_gives_the_same_rows_on_spark_and_duckdb(spark, catalog_db, dataset, tmp_path):
    """Golden parity over the full catalog × default deployments × workloads: each view
    computed once per engine (Spark: checkpointed in dependency order), rows compared as
    multisets."""
    from archsql.spark.engine import create_views, register_tables

    manifest = read_manifest(dataset)
    register_tables(spark, dataset, manifest)
    order = create_views(spark, manifest, materialize=True)
    assert len(order) == len(manifest["views"]) > 100
    mismatches = []
    rows = 0
    for _name, n, found in parity.compare_views(spark, catalog_db, order, tmp_path):
        rows += n
        mismatches += found
    assert not mismatches, "\n".join(map(str, mismatches))
    assert rows > 1_000_000  # the views hold rows: a real comparison
    con = duckdb.connect(str(catalog_db), read_only=True)
    ((models,),) = con.execute("select count(*) from models").fetchall()
    con.close()
    assert spark.table("models").count() == models > 40  # the whole catalog


@needs_spark
def test_measured_vs_sol_reads_the_corpus_partitions_and_matches_duckdb(spark, small_store, tmp_path):
    """The corpus import's own Parquet partitions, read by Spark directly (the dataset points
    at them), give measured_vs_sol the same rows as DuckDB.  The measurements: every BF16/FP8
    GEMM shape Llama-3.1-8B runs on one H200 in the store's deployments, timed 10 ms each —
    at most 2·8192·14336·4096 / 10 ms = 9.6e13 FLOP/s, below the H200's 989e12 BF16 peak."""
    import shutil

    from archsql import api
    from archsql.kernel_corpus import corpus_dir, import_files
    from archsql.spark.engine import create_views, register_tables

    db = tmp_path / "store.duckdb"
    shutil.copy(small_store, db)
    con = duckdb.connect(str(db), read_only=True)
    shapes = con.sql(
        "select distinct dtype, m, n, k from kernel_signatures where model = 'Meta-Llama-3.1-8B' "
        "and op_kind = 'gemm' and gpu = 'H200 SXM' and dtype in ('bf16', 'fp8') order by all"
    ).fetchall()
    con.close()
    assert shapes
    csv = tmp_path / "gemm.csv"
    csv.write_text(
        "op_kind,gpu,library,library_version,kernel,dtype,m,n,k,latency_ms\n"
        + "".join(f"gemm,H200 SXM,vllm,0.11.0,cutlass,{d},{m},{n},{k},10\n" for d, m, n, k in shapes),
        encoding="utf-8",
    )
    report = import_files(db, [csv])
    # the importer's guards reject a timing implausible for its shape (2 of 157 tiny GEMMs at
    # 10 ms on the one-model store): the rows kept are what the corpus holds
    assert 0 < report.total("rows_kept") <= len(shapes)
    out = tmp_path / "dataset"
    export_dataset(out, db)
    manifest = read_manifest(out)
    assert manifest["tables"]["kernel_corpus"]["path"] == str(corpus_dir(db).absolute())
    register_tables(spark, out, manifest)
    create_views(spark, manifest, only=["measured_vs_sol"], materialize=True)  # each view once
    duck = api.query("select * from measured_vs_sol", db=db)
    got = spark.table("measured_vs_sol").toArrow()
    assert duck.num_rows > 0
    assert not parity.compare("measured_vs_sol", duck, got)
    measured = sum(1 for r in got.select(["matched"]).to_pylist() if r["matched"])
    assert measured > 0  # the corpus rows were matched, not only the SOL side


@needs_spark
def test_sweep_on_spark_gives_the_duckdb_sweep_rows(spark, small_store, small_dataset):
    """``archsql sweep --engine spark``: the same grid (2 layouts × 2 batches × 1 context × both
    phases = 8 rows) over the dataset's partitions of the model gives DuckDB's sweep rows."""
    from archsql import sweep as sweeps
    from archsql.spark.engine import sweep

    plan = sweeps.plan(["H200 SXM"], [8], [1, 16], [8192], phase="both", degrees={"tp": [1, 8], "ep": [1]})
    model = "Meta-Llama-3.1-8B"
    duck = sweeps.sweep(model, small_store, plan.deployments, plan.workloads)
    got = sweep(model, small_store, small_dataset, plan.deployments, plan.workloads, spark=spark)
    assert duck.num_rows == len(plan.deployments) * len(plan.workloads) == 8
    assert not parity.compare("sweep", duck, got)
    assert got.column("time_s").to_pylist()  # SOL times, not NULLs
    assert all(t is not None and t > 0 for t in got.column("time_s").to_pylist())


@needs_spark
def test_sql_on_spark_answers_a_report_view_as_duckdb(spark, small_store, small_dataset):
    """``archsql sql --engine spark`` over a report view at the end of a long chain (step_sol
    reads ~50 views): each view it reads is computed once first, and the rows equal DuckDB's."""
    from archsql.api import query as duck_query
    from archsql.spark.engine import query

    sql = (
        "select model, deployment, workload, time_s, tokens_per_s from step_sol "
        "where model = 'Meta-Llama-3.1-8B' order by deployment, workload"
    )
    duck = duck_query(sql, db=small_store)
    got = query(sql, small_dataset, spark=spark)
    assert duck.num_rows > 0
    assert not parity.compare("step_sol", duck, got)


@needs_spark
def test_serving_views_give_the_same_rows_on_spark_and_duckdb(spark, small_store, tmp_path):
    """The serving views hold rows only for stored serving cases (``serve-estimate`` rolls its
    cases back): three kept on purpose — vLLM on one H200, SGLang and TensorRT-LLM on eight —
    and their steps' workloads, then each serving view (and what it reads) computed once on
    Spark equals DuckDB's rows."""
    import shutil

    from archsql import serving
    from archsql.spark.engine import create_views, register_tables
    from archsql.store import connect, refresh

    db = tmp_path / "store.duckdb"
    shutil.copy(small_store, db)
    model = "Meta-Llama-3.1-8B"
    cases = [
        dict(serving_case="vllm", deployment="1xH200-single", framework="vllm", version="0.11.2", concurrency=16),
        dict(serving_case="sglang", deployment="8xH200-tp8-ep8", framework="sglang", version="0.5.9", concurrency=64),
        dict(
            serving_case="trtllm", deployment="8xH200-tp8-ep8", framework="trtllm", version="1.2.0rc2", concurrency=128
        ),
    ]
    con = connect(db, read_only=False, derived=False)
    con.begin()
    serving.prepare(con, [{**c, "model": model, "isl": 1024, "osl": 1024} for c in cases])
    con.commit()
    refresh(con)
    con.close()
    out = tmp_path / "dataset"
    export_dataset(out, db)
    manifest = read_manifest(out)
    register_tables(spark, out, manifest)
    views = ["int_serving_steps", "serving_admission", "serving_step_times", "serving_estimates"]
    create_views(spark, manifest, only=views, materialize=True)
    compared = {name: (n, found) for name, n, found in parity.compare_views(spark, db, views, tmp_path / "cmp")}
    assert {name: found for name, (_, found) in compared.items()} == {name: [] for name in views}
    assert compared["serving_estimates"][0] == len(cases)  # every case answered on both engines
