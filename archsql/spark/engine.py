"""The views on Apache Spark: ``--engine spark`` (the optional extra ``archsql[spark]``).

:func:`open_dataset` registers the tables of an exported dataset (:mod:`archsql.spark.dataset`)
as Spark views over their Parquet files — each read with the schema the manifest records, the
partition columns from the ``model=…`` folders — and creates the store's views on the session,
in the manifest's dependency order, each transpiled from its DuckDB file by
:func:`archsql.spark.transpile.to_spark`.  The session is Spark's own: local mode unless the
usual Spark configuration (``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS``, ``SPARK_REMOTE``,
a ``SparkSession`` already running) names a cluster.

Semantics the views rely on are set on the session (:data:`SESSION_CONF`): non-ANSI mode
(``x / 0`` is NULL, as in DuckDB), ``size(NULL)`` is NULL (not -1), UTC time zone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from archsql.errors import EngineError, Issue, QueryError
from archsql.spark.dataset import CORPUS, CORPUS_KIND, read_manifest, schema_of
from archsql.spark.transpile import to_spark, view_dirs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXTRA_HINT = "install the extra: pip install 'archsql[spark]' (pyspark; Java 17 or newer on PATH or JAVA_HOME)"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# DuckDB semantics the transpiled views need (docs/spark.md, "engine differences")
SESSION_CONF = {
    "spark.sql.ansi.enabled": "false",
    "spark.sql.legacy.sizeOfNull": "false",
    "spark.sql.session.timeZone": "UTC",
}


def session(conf: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession with :data:`SESSION_CONF` and ``conf`` (e.g. ``spark.master``)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineError(
            issues=[Issue("--engine spark needs pyspark, which is not installed", hint=EXTRA_HINT)]
        ) from None
    builder = SparkSession.builder.appName("archsql")
    settings = {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
        "spark.ui.showConsoleProgress": "false",  # no progress bars on the terminal's stderr
        **(conf or {}),
        **SESSION_CONF,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start (no Java, bad master URL)
        raise EngineError(issues=[Issue(f"Spark did not start: {str(exc).splitlines()[0]}", hint=EXTRA_HINT)]) from None
    for key, value in SESSION_CONF.items():  # a session that was already running
        spark.conf.set(key, value)
    spark.sparkContext.setLogLevel("OFF")  # failures reach the user as archsql errors
    return spark


def _read(spark: SparkSession, root: Path, name: str, entry: dict):
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(schema_of(entry))
    path = Path(entry["path"])
    path = path if path.is_absolute() else root / path
    if entry["kind"] == CORPUS_KIND:
        return spark.read.schema(schema).parquet(str(path / entry["glob"])).select("*", "_metadata.file_path")
    return spark.read.schema(schema).option("basePath", str(path)).parquet(str(path))


def register_tables(spark: SparkSession, directory: str | Path, manifest: dict | None = None) -> list[str]:
    """Each table of the dataset as a temporary view of the session; returns their names."""
    root = Path(directory)
    manifest = manifest or read_manifest(root)
    names = []
    for name, entry in manifest["tables"].items():
        df = _read(spark, root, name, entry)
        if entry["kind"] == CORPUS_KIND:
            # the rows of partition files a committed kernel_corpus_sources row names, as the
            # store's kernel_corpus view reads them (archsql.kernel_corpus.storage._partitions_sql)
            df.createOrReplaceTempView("__kernel_corpus_files")
            cols = ", ".join(f"p.`{f.name}`" for f in schema_of(entry))
            spark.sql(
                f"create or replace temp view {CORPUS} as select {cols} from __kernel_corpus_files as p "
                "where exists (select 1 from kernel_corpus_sources as s where s.source_hash = p.source_hash "
                "and endswith(replace(p.file_path, '\\\\', '/'), concat('/', s.partition_file)))"
            )
        else:
            df.createOrReplaceTempView(name)
        names.append(name)
    return names


def view_file(name: str):
    """The DuckDB view file of ``name`` among the view folders."""
    from archsql.views import view_files

    for folder in view_dirs():
        for f in view_files(folder):
            if f.name == name:
                return f
    raise QueryError(f"the dataset names a view '{name}' this archsql has no file for; export it again")


def _columns(spark: SparkSession, name: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(f"`{name}`").schema.fields}


def create_views(
    spark: SparkSession,
    manifest: dict,
    *,
    only: Iterable[str] | None = None,
    materialize: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[str]:
    """Create the dataset's views (``only``: those and the views they read) on the session,
    in dependency order, each transpiled from its DuckDB file.  ``materialize``: compute each
    view's rows once it is created (``localCheckpoint``: the rows, without the plan that made
    them), so the views after it read those rows — :func:`archsql.views.computed_once` on Spark."""
    from archsql.views import _parse, dependencies

    order = [v["name"] for v in manifest["views"]]
    files = {name: view_file(name) for name in order}
    if only is not None:
        known = set(manifest["tables"]) | set(files)
        wanted: set[str] = set()
        stack = [n.lower() for n in only if n.lower() in files]
        while stack:
            n = stack.pop()
            if n not in wanted:
                wanted.add(n)
                stack.extend(dependencies(files[n], known, files))
        order = [n for n in order if n in wanted]
    schemas: dict[str, dict[str, str]] = {}
    for i, name in enumerate(order, start=1):
        f = files[name]
        reads = {t.name.lower() for t in _parse(f).find_all(_table_type())}
        for r in reads:
            if r and r not in schemas and spark.catalog.tableExists(r):
                schemas[r] = _columns(spark, r)
        sql = to_spark(f.sql, schemas, file=str(f.path))
        try:
            # a view made from a DataFrame keeps its analyzed plan: the views after it do not
            # parse and analyze its whole chain again (a SQL temp view stores its text)
            df = spark.sql(sql)
            if materialize:  # computed now; the views after it read its rows, not its plan
                df = df.localCheckpoint(eager=True)
            df.createOrReplaceTempView(name)
        except Exception as exc:
            raise EngineError(issues=[Issue(f"Spark rejected the view: {_message(exc)}", file=str(f.path))]) from None
        schemas[name] = _columns(spark, name)
        if progress:
            progress(name, i, len(order))
    return order


def _table_type():
    from sqlglot import exp

    return exp.Table


def _message(exc: Exception) -> str:
    """The line of a Spark error that says what went wrong (a JVM error's first line only
    names the call that failed)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    for line in lines:
        if "Exception: " in line and not line.startswith("at "):
            return line.split("Exception: ", 1)[1]
    return lines[0] if lines else type(exc).__name__


def open_dataset(
    directory: str | Path,
    spark: SparkSession | None = None,
    *,
    views: Iterable[str] | None = None,
    materialize: bool = False,
) -> SparkSession:
    """A session with the dataset's tables registered and its views (``views``: those and
    what they read) created."""
    manifest = read_manifest(directory)
    spark = spark or session()
    register_tables(spark, directory, manifest)
    create_views(spark, manifest, only=views, materialize=materialize)
    return spark


def query(sql: str, directory: str | Path, spark: SparkSession | None = None) -> pa.Table:
    """Run a read-only query, written in DuckDB's dialect like every archsql query, on Spark
    over the dataset in ``directory``; returns an Arrow table.  The views it reads (and what
    they read) are computed once each, in dependency order, before the query runs — as a
    DuckDB store answers from its derived tables: planning a report view through its whole
    chain of ~50 views at once ran the driver out of heap (as the sweep did)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except ParseError as exc:
        raise QueryError(issues=[Issue(str(exc).splitlines()[0])]) from None
    if not isinstance(tree, exp.Query):
        raise QueryError(issues=[Issue("only a SELECT query runs on Spark", got=sql.strip()[:60])])
    manifest = read_manifest(directory)
    reads = {t.name.lower() for t in tree.find_all(exp.Table)}
    missing = sorted(reads - set(manifest["tables"]) - {v["name"] for v in manifest["views"]} - _ctes(tree))
    if missing:
        from archsql.errors import did_you_mean

        known = set(manifest["tables"]) | {v["name"] for v in manifest["views"]}
        raise QueryError(
            issues=[Issue(f"unknown table or view '{m}' in the dataset", hint=did_you_mean(m, known)) for m in missing]
        )
    spark = open_dataset(directory, spark, views=reads, materialize=True)
    schemas = {r: _columns(spark, r) for r in reads if spark.catalog.tableExists(r)}
    try:
        return spark.sql(to_spark(sql, schemas)).toArrow()
    except Exception as exc:
        raise EngineError(issues=[Issue(f"Spark rejected the query: {_message(exc)}")]) from None


def _ctes(tree: Any) -> set[str]:
    from sqlglot import exp

    return {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}


def timed(spark: SparkSession, sql: str) -> tuple[pa.Table, float]:
    t0 = time.perf_counter()
    out = spark.sql(sql).toArrow()
    return out, time.perf_counter() - t0


def sweep(
    model: str | Sequence[str],
    db: str | Path,
    directory: str | Path,
    deployments: list[dict],
    workloads: list[dict],
    spark: SparkSession | None = None,
) -> pa.Table:
    """:func:`archsql.sweep.sweep` on Spark: the same grid rows (expanded and checked by the
    store's own code, in temporary tables of a read-only connection), the same query
    (``SWEEP_SQL``), over the dataset's evaluated tables of ``model`` (its ``model=``
    partitions only).  ``model`` a list: one Spark job sweeps the grid for each of those
    models (the unit a cluster runs: the models' partitions read in parallel), the rows
    with a ``model`` column first."""
    from archsql.store import DEPLOYMENT_TABLES, WORKLOAD_TABLES, connect, scope_grid

    models = [model] if isinstance(model, str) else list(model)
    if not deployments or not workloads:
        raise QueryError("the sweep grid is empty: no GPU count is divisible by the given tp / cp / pp / ep degrees")
    if not models:
        raise QueryError("no model to sweep")
    manifest = read_manifest(directory)
    unknown = [m for m in models if m not in _models(directory, manifest)]
    if unknown:
        raise QueryError(f"model '{unknown[0]}' is not in the dataset {directory}; export a store that has it")
    # the grid rows as the DuckDB sweep writes them (defaults, derived columns, checks): into
    # temporary tables of a read-only connection, nothing written to the store
    con = connect(Path(db), read_only=True, derived=False)
    try:
        scope_grid(con, models[0], deployments, workloads)
        problems = con.execute(
            "select name, problem from parameter_checks where name like 'sweep:%' order by all"
        ).fetchall()
        if problems:
            raise QueryError("invalid sweep rows: " + "; ".join(f"{d}: {p}" for d, p in problems[:5]))
        grid = {}
        for name in (*DEPLOYMENT_TABLES, *WORKLOAD_TABLES):
            key = "deployment" if name in DEPLOYMENT_TABLES else "workload"
            grid[name] = con.sql(f"select * from temp.main.{name} where {key} like 'sweep:%'").to_arrow_table()
    finally:
        con.close()
    spark = spark or session()
    register_tables(spark, directory, manifest)
    chosen = ", ".join(f"'{_quote(m)}'" for m in models)
    for name, entry in manifest["tables"].items():  # the models' partitions only
        if "model" in entry.get("partition_by", []):
            spark.table(name).where(f"model in ({chosen})").createOrReplaceTempView(name)
    for name, rows in grid.items():
        _frame(spark, rows, schema_of(manifest["tables"][name])).createOrReplaceTempView(name)
    tree = _sweep_query(models, several=not isinstance(model, str))
    from sqlglot import exp

    reads = {t.name.lower() for t in tree.find_all(exp.Table)}
    # each view computed once, in dependency order, from the rows of the ones before (as
    # DuckDB's sweep does, archsql.views.computed_once): a view made from the plans of all the
    # views under it is one tree the size of the whole chain, and analyzing the per-device
    # views' tree ran the driver out of memory
    create_views(spark, manifest, only=reads, materialize=True)
    try:
        return spark.sql(to_spark(tree.sql(dialect="duckdb"))).toArrow()
    except Exception as exc:
        raise EngineError(issues=[Issue(f"Spark rejected the sweep query: {_message(exc)}")]) from None


def _sweep_query(models: list[str], *, several: bool):
    """``SWEEP_SQL`` with its one model parameter bound to ``models`` (``s.model in (…)``);
    ``several``: the model as the first column."""
    import sqlglot
    from sqlglot import exp

    from archsql.sweep import SWEEP_SQL

    tree = sqlglot.parse_one(SWEEP_SQL, dialect="duckdb")
    (param,) = list(tree.find_all(exp.Placeholder))
    eq = param.parent
    eq.replace(exp.column("model", "s").isin(*(exp.Literal.string(m) for m in models)))
    if several:
        tree.set("expressions", [exp.column("model", "s"), *tree.expressions])
        tree.set(
            "order",
            exp.Order(expressions=[exp.Ordered(this=exp.column("model", "s")), *tree.args["order"].expressions]),
        )
    return tree


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _frame(spark: SparkSession, rows: pa.Table, schema: pa.Schema):
    """Rows as a DataFrame with the dataset's schema for that table (column order and types)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(rows.select(schema.names).cast(schema).to_pylist(), from_arrow_schema(schema))


def _models(directory: str | Path, manifest: dict) -> set[str]:
    entry = manifest["tables"].get("models")
    if entry is None:
        return set()
    import pyarrow.dataset as ds

    path = Path(directory) / entry["path"]
    return set(ds.dataset(path, format="parquet", partitioning="hive").to_table(columns=["model"])["model"].to_pylist())
