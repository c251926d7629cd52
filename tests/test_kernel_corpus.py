"""The kernel corpus: validated, append-only, idempotent ingest of measurement files, the
partition folder, and the views over it.

Hand-derived numbers (H200 SXM row of gpus.csv: 989e12 dense BF16 FLOP/s, 4.8e12 B/s):

* GEMM 4096³ in BF16: 2·4096³ = 137,438,953,472 FLOP.  In 200 µs that is 6.872e14 FLOP/s,
  MFU 6.872e14 / 9.89e14 = 0.6948.  Bytes: 2·(4096·4096 + 4096·4096) activations in and out
  + 2·4096·4096 weights = 100,663,296 B → 5.03e11 B/s, MBU 0.1049.
* The same GEMM in 200 ns (a µs time written as ns) is 6.872e17 FLOP/s: MFU 695 > 1.
* GEMM 8192³: 2·8192³ = 1.0995e12 FLOP in 50 µs = 2.2e16 FLOP/s: MFU 22.2 > 1.
* GEMM 1024³: 2,147,483,648 FLOP in 50 µs = 4.29e13 FLOP/s: MFU 0.0434.
* Decode attention, 1 request, 32 query / 8 KV heads of 128, 2048 cached keys: FLOP =
  2·1·32·(128 + 128)·2048 = 33,554,432; bytes = 2·1·1·32·256 (q, out) + 2·1·8·256·2048
  (K, V) = 16,384 + 8,388,608 = 8,404,992 → in 20 µs 4.2e11 B/s, MBU 0.0875.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archsql import api
from archsql.errors import CorpusError, UnsafeSQLError
from archsql.kernel_corpus import corpus_dir, import_files, open_corpus, sync
from archsql.kernel_corpus.registry import OP_KINDS
from archsql.kernel_corpus.schema import CORPUS_SCHEMA
from archsql.kernel_corpus.storage import VIEWS_DIR, connect_read_only
from archsql.views import check_invariants, view_docs

GEMM_4096_FLOPS = 2 * 4096**3


@pytest.fixture(scope="session")
def corpus_template(tmp_path_factory) -> Path:
    """An empty store with the corpus tables and views, built once and copied per test."""
    db = tmp_path_factory.mktemp("corpus_template") / "template.duckdb"
    open_corpus(db).close()
    return db


@pytest.fixture
def db(corpus_template, tmp_path) -> Path:
    path = tmp_path / "store.duckdb"
    shutil.copy(corpus_template, path)
    return path


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def rows(db: Path, sql: str) -> list[dict]:
    return api.query(sql, db=db).to_pylist()


BAD_CSV = (
    "op_kind,gpu,library,library_version,kernel,dtype,m,n,k,latency_ms",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,4096,4096,4096,0.2",  # line 2: good, MFU 0.695
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,2048,4096,4096,abc",  # line 3: latency not a number
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,1024,4096",  # line 4: a row missing two columns
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,4096,4096,4096,0.2",  # line 5: duplicate of line 2
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,8192,8192,8192,0.05",  # line 6: MFU 22 > 1
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,1024,1024,1024,0.05",  # line 7: good, MFU 0.043
    "gem,H200 SXM,vllm,0.24.0,cutlass,bf16,64,64,64,0.01",  # line 8: unknown op kind
    "gemm,H200,vllm,0.24.0,cutlass,bf16,64,64,64,0.01",  # line 9: unknown GPU
)


def test_queries_while_another_connection_holds_the_store(db):
    """DuckDB shares one instance per file and process: the first query locks it down
    (no file access), and a second query while another connection keeps the instance alive
    failed with "Cannot change allowed_directories when enable_external_access is disabled"."""
    import duckdb

    with duckdb.connect(str(db), read_only=True):
        for _ in range(2):
            assert rows(db, "select count(*) as n from kernel_corpus") == [{"n": 0}]
        with pytest.raises(UnsafeSQLError):
            rows(db, "select * from read_csv('/etc/passwd')")


def test_bad_rows_are_rejected_with_line_and_reason_good_rows_kept(db, tmp_path):
    path = write(tmp_path / "sweep.csv", *BAD_CSV)
    rejects = tmp_path / "rejects.csv"
    report = import_files(db, [path], rejects=rejects)
    (outcome,) = report.outcomes
    assert (outcome.rows_read, outcome.rows_kept, outcome.rows_rejected) == (8, 2, 6)
    located = {(r.source_row, r.field): r.reason for r in report.sample}
    assert located[(3, "latency_ms")] == "not a number"
    assert located[(4, "k, latency_ms")] == "the row has 8 fields, the header 10: no value for k, latency_ms"
    assert located[(5, None)] == "duplicate of line 2"
    assert located[(6, "latency_us")].startswith("implied MFU 22.2 > 1: 1.1e+12 FLOP in 50 us")
    assert "above the H200 SXM bf16 peak of 9.89e+14 FLOP/s" in located[(6, "latency_us")]
    assert located[(8, "op_kind")] == "unknown op kind; did you mean 'gemm'?"
    assert located[(9, "gpu")].endswith("did you mean 'H200 SXM'?")
    assert report.sample[0].render() == f"{path}:3 latency_ms: not a number (got 'abc')"
    # the same problems are in the store and in the rejects file
    stored = rows(db, "select source_row, field, reason from kernel_corpus_rejects order by source_row")
    assert [r["source_row"] for r in stored] == [3, 4, 5, 6, 8, 9]
    assert rejects.read_text(encoding="utf-8").count("\n") == 1 + 6
    kept = rows(db, "select source_row, m, latency_us, mfu, mbu, check_status from kernel_measurements order by 1")
    assert [(r["source_row"], r["m"], r["latency_us"]) for r in kept] == [(2, 4096, 200.0), (7, 1024, 50.0)]
    assert kept[0]["mfu"] == pytest.approx(GEMM_4096_FLOPS / 200e-6 / 989e12)  # 0.6948
    assert kept[0]["mbu"] == pytest.approx(100_663_296 / 200e-6 / 4.8e12)  # 0.1049
    assert kept[1]["mfu"] == pytest.approx(2 * 1024**3 / 50e-6 / 989e12)
    assert {r["check_status"] for r in kept} == {"not_checked"}


def test_unit_mismatch_and_unknown_unit(db, tmp_path):
    path = write(
        tmp_path / "units.csv",
        "op_kind,gpu,library,dtype,m,n,k,latency,latency_unit",
        "gemm,H200 SXM,vllm,bf16,4096,4096,4096,200,us",  # 200 µs: MFU 0.695
        "gemm,H200 SXM,vllm,bf16,4096,4096,4096,200,ns",  # 200 µs written as ns: MFU 695
        "gemm,H200 SXM,vllm,bf16,4096,4096,4096,0.2,minutes",
        "gemm,H200 SXM,vllm,bf16,4096,4096,4096,0.0002,s",  # 200 µs again, other unit: duplicate
    )
    report = import_files(db, [path])
    assert report.total("rows_kept") == 1
    located = {r.source_row: r for r in report.sample}
    assert located[3].reason.startswith("implied MFU 695 > 1")
    assert located[3].reason.endswith("is the time in the unit it claims (the row gives latency in ns)?")
    assert (located[4].field, located[4].value) == ("latency_unit", "minutes")
    assert located[4].reason == "unknown time unit (expected s, ms, us, ns)"
    assert located[5].reason == "duplicate of line 2"


def test_a_column_an_op_kind_needs_is_missing(db, tmp_path):
    path = write(
        tmp_path / "mixed.csv",
        "op_kind,gpu,library,dtype,phase,m,n,batch,q_len,kv_len,heads,kv_heads,head_dim,latency_us",
        "gemm,H200 SXM,torch,bf16,,64,64,,,,,,,10",
        "attention,H200 SXM,torch,bf16,decode,,,1,1,2048,32,8,128,20",
    )
    report = import_files(db, [path])
    assert [(r.source_row, r.field, r.reason) for r in report.sample] == [(2, "k", "missing: op kind gemm needs k")]
    (row,) = rows(db, "select op_kind, phase, flops, hbm_bytes, mbu from kernel_measurements")
    assert (row["op_kind"], row["phase"], row["flops"], row["hbm_bytes"]) == (
        "attention",
        "decode",
        33_554_432,
        8_404_992,
    )
    assert row["mbu"] == pytest.approx(8_404_992 / 20e-6 / 4.8e12)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("op_kind,gpu,library,m,n,k,latncy_us", "unknown column 'latncy_us'"),
        ("gpu,library,m,n,k,latency_us", "missing column 'op_kind'"),
        ("op_kind,gpu,library,m,n,k", "no time column"),
        ("op_kind,gpu,library,m,n,k,latency_us,latency_ms", "more than one time column"),
        ("op_kind,gpu,library,m,n,k,latency", "latency needs a latency_unit column"),
        ("op_kind,gpu,library,source_row,m,n,k,latency_us", "column 'source_row' is set by the importer"),
    ],
)
def test_a_bad_header_rejects_the_file_and_imports_nothing(db, tmp_path, header, message):
    path = write(tmp_path / "bad.csv", header, "gemm,H200 SXM,vllm,1,1,1,1")
    with pytest.raises(CorpusError) as info:
        import_files(db, [path])
    assert any(i.message.startswith(message) and i.line == 1 for i in info.value.issues), str(info.value)
    assert rows(db, "select count(*) as n from kernel_corpus_sources") == [{"n": 0}]


def test_reimport_is_idempotent_and_partitions_are_append_only(db, tmp_path):
    path = write(tmp_path / "sweep.csv", *BAD_CSV)
    import_files(db, [path])
    (partition,) = (corpus_dir(db) / "file").glob("*.parquet")
    before = partition.read_bytes()
    again = import_files(db, [path])
    assert [o.status for o in again.outcomes] == ["already imported"]
    assert rows(db, "select count(*) as n from kernel_corpus") == [{"n": 2}]
    # a new version of the same file: its old rows are already present, only the new row is appended
    write(path, *BAD_CSV, "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,2048,2048,2048,0.02")
    (outcome,) = import_files(db, [path]).outcomes
    assert (outcome.rows_read, outcome.rows_kept, outcome.rows_rejected, outcome.rows_already_present) == (9, 1, 6, 2)
    assert rows(db, "select count(*) as n from kernel_corpus") == [{"n": 3}]
    assert partition.read_bytes() == before  # never rewritten
    assert len(list((corpus_dir(db) / "file").glob("*.parquet"))) == 2
    # the corpus's own read connection: the model views under measured_vs_* read the store's
    # derived tables (computed by the same SQL) instead of evaluating their chains again
    assert check_invariants(connect_read_only(db), VIEWS_DIR) == []


def test_parquet_files_and_typed_columns(db, tmp_path):
    path = tmp_path / "runs.parquet"
    pq.write_table(
        pa.table(
            {
                "op_kind": ["gemm", "gemm"],
                "gpu": ["H200 SXM", "H200 SXM"],
                "library": ["torch", "torch"],
                "dtype": ["bfloat16", "bf16"],
                "m": [4096, 4096],
                "n": [4096, 4096],
                "k": [4096.0, 4096.5],  # the second is not an integer
                "latency_us": [200.0, 200.0],
            }
        ),
        path,
    )
    report = import_files(db, [path])
    assert [(r.source_row, r.field, r.reason) for r in report.sample] == [(1, "k", "not an integer")]
    assert rows(db, "select dtype, k from kernel_corpus") == [{"dtype": "bf16", "k": 4096}]


def test_views_are_documented_and_invariants_hold(db, tmp_path):
    import_files(db, [write(tmp_path / "sweep.csv", *BAD_CSV)])
    docs = view_docs(VIEWS_DIR)
    con = connect_read_only(db)  # the model views read the store's derived tables
    try:
        for view, doc in docs.items():
            actual = [r[0] for r in con.execute(f"describe {view}").fetchall()]
            assert [c["name"] for c in doc["columns"]] == actual, view
        assert check_invariants(con, VIEWS_DIR) == []
    finally:
        con.close()
    assert [c["name"] for c in docs["base_kernel_corpus"]["columns"]] == CORPUS_SCHEMA.names
    kinds = rows(db, "select op_kind from kernel_op_kinds")
    assert {r["op_kind"] for r in kinds} == {k.name for k in OP_KINDS}
    (summary,) = rows(db, "select * from kernel_corpus_summary")
    assert summary == {
        "gpu": "H200 SXM",
        "op_family": "gemm",
        "library": "vllm",
        "library_version": "0.24.0",
        "measurements": 2,
        "op_kinds": 1,
        "kernels": 1,
        "sources": 1,
    }


def test_archsql_sql_reads_the_corpus_but_no_other_file(db, tmp_path):
    import_files(db, [write(tmp_path / "sweep.csv", *BAD_CSV)])
    assert rows(db, "select count(*) as n from kernel_corpus") == [{"n": 2}]
    with pytest.raises(UnsafeSQLError):
        api.query(f"select * from read_csv('{tmp_path / 'sweep.csv'}')", db=db)


def test_sync_registers_partitions_copied_from_another_corpus(db, corpus_template, tmp_path):
    import_files(db, [write(tmp_path / "sweep.csv", *BAD_CSV)])
    other = tmp_path / "other" / "store.duckdb"
    other.parent.mkdir()
    shutil.copy(corpus_template, other)
    shutil.copytree(corpus_dir(db) / "file", corpus_dir(other) / "file")
    assert rows(other, "select count(*) as n from kernel_corpus_sources") == [{"n": 0}]
    assert rows(other, "select count(*) as n from kernel_corpus") == [{"n": 0}]  # no source names the file yet
    assert sync(other) == {"files": 1, "sources": 1, "unregistered": 0, "staging_removed": 0}
    assert sync(other) == {"files": 0, "sources": 0, "unregistered": 0, "staging_removed": 0}
    (source,) = rows(other, "select source_key, rows_kept from kernel_corpus_sources")
    assert source == {"source_key": "file:sweep.csv", "rows_kept": 2}
    assert rows(other, "select count(*) as n from kernel_measurements") == [{"n": 2}]


def test_missing_file_is_a_located_error(db, tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        import_files(db, [tmp_path / "nope.csv"])
    with pytest.raises(CorpusError, match=r"\.csv or \.parquet"):
        import_files(db, [write(tmp_path / "x.txt", "a")])


def test_every_primitive_kernel_kind_is_a_registered_op_kind():
    """The op kinds primitives declare (Primitive.kernel_kind → the op_kernels table that
    int_node_kernels joins) are op kinds the corpus registry knows, and a primitive that
    subclasses another inherits its kind unless it says otherwise (router → gemm)."""
    from archsql.evaluator.primitives.base import op_kernels_table, registry

    kinds = {k.name for k in OP_KINDS}
    rows = {r["op"]: r for r in op_kernels_table().to_pylist()}
    table = {op: r["op_kind"] for op, r in rows.items() if r["op_kind"]}
    assert set(table.values()) <= kinds, set(table.values()) - kinds
    assert table["router"] == table["linear"] == "gemm"
    assert "sparse_attention_score" not in table  # declared None: no measured sparse kind yet
    assert all(table.get(name) == cls.kernel_kind for name, cls in registry().items() if cls.kernel_kind)
    # the stages of an attention kernel come with it, measured kind or not (sparse ones inherit)
    stages = {op: r["attention_stage"] for op, r in rows.items() if r["attention_stage"]}
    assert stages["attention_score"] == stages["sparse_attention_score"] == "score"
    assert stages["attention_apply"] == stages["sparse_attention_apply"] == "apply"
