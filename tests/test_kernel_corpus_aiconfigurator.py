"""aiconfigurator-core's database mapped onto the corpus, on small Parquet files written
here in the wheel's layout (``aiconfigurator_core/systems/data/<system>/<family>/
<framework>/<version>/<table>.parquet``); the real wheel is only used by the ``slow`` test.

Hand-derived numbers (H200 SXM: 989e12 BF16 / 1978e12 FP8 dense FLOP/s, 4.8e12 B/s HBM,
NVLink 900 GB/s bidirectional = 450e9 B/s per direction):

* GEMM 4096³ BF16 in 0.2 ms = 200 µs: 2·4096³ / 200e-6 = 6.872e14 FLOP/s, MFU 0.6948;
  the same in FP8 in 0.1 ms: 1.374e15 / 1.978e15 = 0.6948.  8192³ in 0.05 ms: MFU 22.2.
* moe_a2a latency is in µs: 83.4 stays 83.4 (every other table is ms: × 1000).
* NCCL all-reduce of 1,048,576 half elements = 2,097,152 bytes over 8 GPUs: each rank sends
  at least 2,097,152·7/8 = 1,835,008 bytes; in 0.05 ms that is 3.67e10 B/s, link use 0.0816.
* Decode MLA, 64 requests, 16 local heads, 8191 cached + 1 new token (kv_len 8192), FP8 KV:
  FLOP = 2·64·16·8192·(2·512 + 64) = 18,253,611,008; in 100 µs against the FP8 peak (the
  faster of BF16 and the FP8 cache) MFU = 1.8254e14 / 1.978e15 = 0.0923.  Bytes = FP8 latent
  cache 64·8192·(512 + 64) = 301,989,888 + BF16 q and out 2·64·1·16·(2·512 + 64) = 2,228,224
  → 304,218,112 B / 100 µs = 3.042e12 B/s, MBU 0.6338.
"""

from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archsql import api
from archsql.errors import CorpusError
from archsql.kernel_corpus import import_aiconfigurator, open_corpus
from archsql.kernel_corpus.aiconfigurator import TABLES, data_files, locate
from archsql.kernel_corpus.storage import VIEWS_DIR, connect_read_only
from archsql.views import check_invariants

COMMON = {"framework": "VLLM", "device": "NVIDIA H200"}


def _write(root: Path, rel: str, rows: list[dict]) -> None:
    path = root / "aiconfigurator_core" / "systems" / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _gemm(dtype: str, m: int, latency_ms: float, version: str = "0.23.0") -> dict:
    return {**COMMON, "version": version, "op_name": "gemm", "kernel_source": "torch.nn.functional.linear",
            "gemm_dtype": dtype, "m": m, "n": m, "k": m, "latency": latency_ms}  # fmt: skip


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A site-packages-like folder: the data tree and the dist-info naming version 0.12.0."""
    root = tmp_path_factory.mktemp("site")
    (root / "aiconfigurator_core-0.12.0.dist-info").mkdir()
    _write(root, "h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet", [
        _gemm("bfloat16", 4096, 0.2),  # row 0: kept, MFU 0.695; the file says 0.23.0, the folder 0.24.0
        _gemm("fp8", 4096, 0.1),  # row 1: kept, MFU 0.695 of the FP8 peak
        _gemm("bfloat16", 8192, 0.05),  # row 2: MFU 22 > 1
        _gemm("bfloat16", 1024, 0.0),  # row 3: zero time
        _gemm("bfloat16", 4096, 0.2),  # row 4: duplicate of row 0
    ])  # fmt: skip
    _write(root, "h200_sxm/comm/trtllm/1.3.0rc11/moe_a2a_perf.parquet", [
        {**COMMON, "framework": "TRTLLM", "version": "1.3.0rc11", "op_name": "moe_a2a", "kernel_source": "deepep",
         "comm_backend": "trtllm_deepep_ht", "phase": "dispatch", "comm_dtype": "bfloat16", "ep_size": 8,
         "node_num": 1, "hidden_size": 7168, "topk": 8, "num_experts": 256, "num_tokens": 128, "sms": 0,
         "transmit_us": 83.4, "notify_us": 0.0, "latency": 83.4},
    ])  # fmt: skip
    _write(root, "h200_sxm/comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet", [
        {**COMMON, "framework": "sglang", "version": "0.5.12", "op_name": "ll", "node_num": 1,
         "kernel_source": "deepep", "hidden_size": 7168, "num_token": 96, "num_topk": 8, "num_experts": 288,
         "combine_avg_t_us": 203.8, "combine_bandwidth_gbps": 53.3, "dispatch_avg_t_us": 111.4,
         "dispatch_bandwidth_gbps": 50.4},
    ])  # fmt: skip
    _write(root, "h200_sxm/comm/nccl/2.27.3/nccl_perf.parquet", [
        {**COMMON, "framework": "TRTLLM", "version": "2.27.3", "op_name": op, "kernel_source": "NCCL",
         "nccl_dtype": "half", "num_gpus": 8, "message_size": 1048576, "latency": 0.05}
        for op in ("all_reduce", "alltoall")
    ])  # fmt: skip
    _write(root, "h200_sxm/mla/trtllm/1.3.0rc20/generation_mla_perf.parquet", [
        {**COMMON, "framework": "TRTLLM", "version": "1.3.0rc20", "op_name": "mla_generation",
         "kernel_source": "default", "mla_dtype": "bfloat16", "kv_cache_dtype": "fp8", "num_heads": 16,
         "batch_size": 64, "isl": 1, "tp_size": 8, "step": 8191, "latency": 0.1},
    ])  # fmt: skip
    _write(root, "mi999/gemm/vllm/0.1.0/gemm_perf.parquet", [_gemm("bfloat16", 4096, 0.2, "0.1.0")])
    _write(root, "h200_sxm/gemm/vllm/0.24.0/brand_new_perf.parquet", [{"latency": 1.0}])
    return root


@pytest.fixture(scope="module")
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


def measurements(db: Path, where: str = "true") -> list[dict]:
    return api.query(f"select * from kernel_measurements where {where} order by source_key, source_row, op_kind",
                     db=db).to_pylist()  # fmt: skip


def test_tables_map_onto_the_corpus_with_provenance_and_units(package, db):
    report = import_aiconfigurator(db, location=package)
    assert report.unmapped == ["brand_new_perf"]
    assert report.total("rows_read") == 5 + 1 + 2 + 2 + 1 + 1
    assert report.total("rows_kept") == 2 + 1 + 2 + 2 + 1
    rejected = {(r.location.rsplit("/", 1)[-1], r.source_row): r.reason for r in report.sample}
    assert rejected[("gemm_perf.parquet", 2)].startswith("implied MFU 22.2 > 1")
    assert rejected[("gemm_perf.parquet", 3)] == "a time must be a positive, finite number"
    assert rejected[("gemm_perf.parquet", 4)] == "duplicate of row 0"
    unknown = [r for r in report.sample if "mi999" in r.location]
    assert [(r.field, r.value) for r in unknown] == [("gpu", "mi999")]

    bf16, fp8 = measurements(db, "op_kind = 'gemm'")
    assert bf16["source"] == "aiconfigurator-core 0.12.0"
    assert bf16["source_key"] == "aiconfigurator-core:h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
    assert (bf16["gpu"], bf16["device_name"], bf16["library"]) == ("H200 SXM", "NVIDIA H200", "vllm")
    assert (bf16["library_version"], bf16["library_version_reported"]) == ("0.24.0", "0.23.0")
    assert (bf16["dtype"], bf16["latency_us"], bf16["kernel"]) == ("bf16", 200.0, "torch.nn.functional.linear")
    assert bf16["mfu"] == pytest.approx(2 * 4096**3 / 200e-6 / 989e12)
    assert (fp8["dtype"], fp8["latency_us"]) == ("fp8", 100.0)
    assert fp8["mfu"] == pytest.approx(2 * 4096**3 / 100e-6 / 1978e12)

    (a2a,) = measurements(db, "source_key like '%moe_a2a%'")
    assert (a2a["op_kind"], a2a["latency_us"], a2a["ep"], a2a["tokens"]) == ("moe_dispatch", 83.4, 8, 128)
    assert '"comm_backend":"trtllm_deepep_ht"' in a2a["attrs"]

    combine, dispatch = measurements(db, "source_key like '%deepep_ll%'")
    assert (dispatch["op_kind"], dispatch["latency_us"], dispatch["source_row"]) == ("moe_dispatch", 111.4, 0)
    assert (combine["op_kind"], combine["latency_us"], combine["source_row"]) == ("moe_combine", 203.8, 0)
    assert dispatch["ep"] == 8 and dispatch["topk"] == 8

    all_reduce, all_to_all = measurements(db, "library = 'nccl'")
    assert (all_reduce["op_kind"], all_to_all["op_kind"]) == ("all_reduce", "all_to_all")
    assert (all_reduce["dtype"], all_reduce["message_bytes"], all_reduce["group_size"]) == ("fp16", 2_097_152, 8)
    assert all_reduce["link_bytes"] == 1_835_008
    assert all_reduce["link_util"] == pytest.approx(1_835_008 / 50e-6 / 450e9)

    (mla,) = measurements(db, "op_kind = 'mla'")
    assert (mla["phase"], mla["heads"], mla["tp"], mla["q_len"], mla["kv_len"]) == ("decode", 16, 8, 1, 8192)
    assert (mla["kv_lora_rank"], mla["rope_dim"], mla["kv_dtype"]) == (512, 64, "fp8")
    assert mla["flops"] == 18_253_611_008 and mla["hbm_bytes"] == 304_218_112
    assert mla["mfu"] == pytest.approx(18_253_611_008 / 100e-6 / 1978e12)
    assert mla["mbu"] == pytest.approx(304_218_112 / 100e-6 / 4.8e12)

    summary = api.query("select * from kernel_corpus_summary order by op_family, library", db=db).to_pylist()
    assert [(r["op_family"], r["library"], r["library_version"], r["measurements"]) for r in summary] == [
        ("comm", "nccl", "2.27.3", 2),
        ("comm", "sglang", "0.5.12", 2),
        ("comm", "trtllm", "1.3.0rc11", 1),
        ("gemm", "vllm", "0.24.0", 2),
        ("mla", "trtllm", "1.3.0rc20", 1),
    ]
    with connect_read_only(db) as con:  # the model views read the store's derived tables
        assert check_invariants(con, VIEWS_DIR) == []


def test_reimport_skips_every_file(package, db):
    first = import_aiconfigurator(db, location=package)
    again = import_aiconfigurator(db, location=package)
    assert len(again.skipped) == len(first.outcomes) and not again.imported
    assert api.query("select count(*) as n from kernel_corpus", db=db).to_pylist() == [{"n": 8}]


def test_systems_filter_and_a_wheel_file(package, db, tmp_path):
    wheel = tmp_path / "aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path in (package / "aiconfigurator_core").rglob("*.parquet"):
            z.write(path, path.relative_to(package).as_posix())
    report = import_aiconfigurator(db, location=wheel, systems=["mi999"])
    assert [o.source.key for o in report.outcomes] == ["aiconfigurator-core:mi999/gemm/vllm/0.1.0/gemm_perf.parquet"]
    with pytest.raises(CorpusError) as info:
        import_aiconfigurator(db, location=wheel, systems=["h20_sxm"])
    assert info.value.issues[0].hint == "did you mean 'h200_sxm'?"


def test_bad_locations_are_errors(tmp_path):
    with pytest.raises(CorpusError, match="no aiconfigurator systems/data folder"):
        locate(tmp_path)
    bogus = tmp_path / "something-1.0-py3-none-any.whl"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(CorpusError, match="not an aiconfigurator-core wheel"):
        locate(bogus)


REAL = importlib.util.find_spec("aiconfigurator_core") is not None


@pytest.mark.slow
@pytest.mark.skipif(not REAL, reason="aiconfigurator-core is not installed (pip install 'archsql[aiconfigurator]')")
def test_the_real_database_one_system(tmp_path):
    data, version, _ = locate(None)
    tables = {f.table for f in data_files(data)}
    assert tables <= set(TABLES), f"tables without a mapping: {sorted(tables - set(TABLES))}"
    db = tmp_path / "store.duckdb"
    report = import_aiconfigurator(db, systems=["h200_sxm"])
    assert report.unmapped == []
    assert report.total("rows_read") > 1_000_000
    assert report.total("rows_kept") + report.total("rows_rejected") == report.total("rows_read")
    by_reason = {reason: n for _, reason, n in report.reasons}
    assert by_reason["a time must be a positive, finite number"] > 0  # the database holds zero times
    summary = api.query("select * from kernel_corpus_summary", db=db).to_pylist()
    assert {r["gpu"] for r in summary} == {"H200 SXM"}
    assert {"gemm", "attention", "mla", "moe", "comm"} <= {r["op_family"] for r in summary}
    assert sum(r["measurements"] for r in summary) == report.total("rows_kept")
    with duckdb.connect(str(db), read_only=True) as con:
        assert check_invariants(con, VIEWS_DIR) == []
    assert version
    shutil.rmtree(tmp_path, ignore_errors=True)
