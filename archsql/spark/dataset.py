"""The store as a partitioned Parquet dataset another engine reads: ``archsql export --parquet
DIR --partition-by model``.

Every table of the store (the evaluated tables, the parameter and reference tables, the
checkpoint tables) is written to ``DIR/<table>/`` — Hive-style ``model=<name>/`` folders for a
table with the partition column(s), one file otherwise — with the table's Arrow schema as the
store holds it (the contract of :mod:`archsql.schema.tables`, never re-inferred from the rows).
A kernel corpus is not copied: its append-only partitions (``<store>.kernel_corpus/<origin>/
<batch>.parquet``) are already Parquet, and the manifest points at them, so Spark reads the
corpus files the import wrote.  ``DIR/manifest.json`` lists each table (path, partition columns,
rows, schema: readable fields and the exact Arrow IPC schema) with the archsql version and the
views the store has, in dependency order — what :mod:`archsql.spark.engine` creates.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from archsql import __version__
from archsql.errors import Issue, QueryError, StoreError

MANIFEST = "manifest.json"
FORMAT = 1
CORPUS = "kernel_corpus"
# the manifest kind of the corpus entry: the import's own partition files, read in place
CORPUS_KIND = "corpus"
EXPORT_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("kind", pa.string()),
        ("rows", pa.int64()),
        ("partitions", pa.int64()),
        ("path", pa.string()),
    ]
)


def schema_json(schema: pa.Schema) -> dict:
    return {
        "fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema],
        "arrow_ipc": base64.b64encode(schema.serialize().to_pybytes()).decode(),
    }


def schema_of(entry: dict) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(entry["schema"]["arrow_ipc"])))


def export_dataset(
    directory: str | Path,
    db: str | Path,
    partition_by: Sequence[str] = ("model",),
    progress: Callable[[str, int, int], None] | None = None,
) -> pa.Table:
    """Write the store ``db`` as a partitioned Parquet dataset into ``directory`` (see the
    module docstring); returns one row per table (name, kind, rows, partitions, path)."""
    from archsql.kernel_corpus.schema import CORPUS_SCHEMA
    from archsql.kernel_corpus.storage import corpus_dir
    from archsql.spark.transpile import view_dirs
    from archsql.store import connect
    from archsql.views import ordered_views

    out = Path(directory)
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise StoreError(
            issues=[
                Issue(
                    "the export folder exists and holds files that are not an archsql dataset",
                    file=str(out),
                    hint="name a new or empty folder (an earlier export, with its manifest.json, is replaced)",
                )
            ]
        )
    con = connect(Path(db), read_only=True, derived=False)
    try:
        tables = [
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_catalog = current_database() "
                "and table_schema = 'main' and table_type = 'BASE TABLE' order by table_name"
            ).fetchall()
        ]
        columns = {t: [d[0] for d in con.execute(f'select * from "{t}" limit 0').description] for t in tables}
        unknown = [c for c in partition_by if not any(c in cols for cols in columns.values())]
        if unknown:
            known = sorted({c for cols in columns.values() for c in cols})
            from archsql.errors import did_you_mean

            raise QueryError(
                issues=[
                    Issue(f"no table of the store has the column '{c}' to partition by", hint=did_you_mean(c, known))
                    for c in unknown
                ]
            )
        views = []
        for folder in view_dirs():
            views += [{"name": f.name, "layer": f.layer} for f in ordered_views(con, folder)]
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        entries: dict[str, dict] = {}
        rows_out = []
        for i, name in enumerate(tables, start=1):
            table = con.sql(f'select * from "{name}"').to_arrow_table()
            keys = [c for c in partition_by if c in table.column_names]
            target = out / name
            if keys and table.num_rows:
                pq.write_to_dataset(
                    table,
                    target,
                    partition_cols=keys,
                    existing_data_behavior="delete_matching",
                    basename_template="part-{i}.parquet",
                )
                parts = len({tuple(r.values()) for r in table.select(keys).to_pylist()})
            else:
                target.mkdir()  # no rows: one empty file (without the partition columns, read from folders)
                pq.write_table(table.drop_columns(keys), target / "part-0.parquet")
                parts = 1 if not keys else 0
            entries[name] = {
                "kind": "table",
                "path": name,
                "partition_by": keys,
                "rows": table.num_rows,
                "schema": schema_json(table.schema),
            }
            rows_out.append(
                {"name": name, "kind": "table", "rows": table.num_rows, "partitions": parts, "path": str(target)}
            )
            if progress:
                progress(name, i, len(tables))
        corpus = corpus_dir(db)
        if "kernel_corpus_sources" in tables and any(corpus.glob("*/*.parquet")):
            entries[CORPUS] = {
                "kind": CORPUS_KIND,
                "path": str(corpus.absolute()),
                "glob": "*/*.parquet",
                "partition_by": [],
                "rows": None,
                "schema": schema_json(CORPUS_SCHEMA),
            }
            rows_out.append(
                {"name": CORPUS, "kind": CORPUS_KIND, "rows": None, "partitions": None, "path": str(corpus)}
            )
    finally:
        con.close()
    manifest = {
        "format": FORMAT,
        "archsql_version": __version__,
        "partition_by": list(partition_by),
        "tables": entries,
        "views": views,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return pa.Table.from_pylist(rows_out, schema=EXPORT_SCHEMA)


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise StoreError(
            issues=[
                Issue(
                    "no archsql dataset here (manifest.json missing)",
                    file=str(path),
                    hint="write one with `archsql export --parquet DIR --partition-by model`",
                )
            ]
        )
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise StoreError(
            issues=[
                Issue(
                    f"dataset format {manifest.get('format')!r}, this archsql reads format {FORMAT}",
                    file=str(path),
                    hint="export it again with this archsql",
                )
            ]
        )
    return manifest
