"""The measurement harness (PyTorch eager references on the CPU, tiny shapes) and the plan.

Plan of Meta-Llama-3.1-8B (archsql/specs/configs/meta-llama__Meta-Llama-3.1-8B.json:
hidden 4096, 32 query / 8 KV heads of 128, intermediate 14336, vocab 128256, 32 layers) for
one decode step of 1 request at 2048 tokens of context (workload decode_b1_c2k), TP = 1:

* GEMMs (m = 1 token): q_proj and o_proj 4096→4096 (2 per layer: 64 launches), k_proj and
  v_proj 4096→1024 (64), gate_proj and up_proj 4096→14336 (64), down_proj 14336→4096 (32),
  lm_head 4096→128256 (1);
* attention: batch 1, q_len 1, kv_len 2048, 32 heads, 8 KV heads, head_dim 128 (32);
* RMSNorm over 4096 for 1 token: 2 per layer + the final norm = 65.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import CorpusError
from archsql.kernel_corpus import open_corpus
from archsql.kernel_corpus.plan import plan, workload

torch = pytest.importorskip("torch")

from archsql.kernel_corpus import harness  # noqa: E402  (needs torch)


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "store.duckdb"
    open_corpus(path).close()
    return path


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_tiny_shapes_match_the_reference(dtype):
    run = harness.measure(harness.TINY_SHAPES, dtype=dtype, warmup=1, repeats=2)
    kinds = [(m.shape.op_kind, m.shape.phase) for m in run.measurements]
    assert kinds == [("gemm", None), ("attention", "prefill"), ("attention", "decode"), ("rmsnorm", None),
                     ("grouped_gemm", None)]  # fmt: skip
    for m in run.measurements:
        assert m.passed, (m.shape, m.check_error)
        assert m.check_error < harness.TOLERANCE[dtype] and m.latency_us > 0 and len(m.times_us) == 2
    assert run.environment["torch"] == torch.__version__ and run.environment["device"] == "cpu"


def test_the_reference_catches_a_wrong_kernel(monkeypatch):
    wrong = dataclasses.replace(
        harness.REFERENCES["gemm"], provider=lambda x, w: torch.nn.functional.linear(x, w) * 1.01
    )
    monkeypatch.setitem(harness.REFERENCES, "gemm", wrong)
    (m,) = harness.measure([harness.TINY_SHAPES[0]], dtype="fp32", warmup=0, repeats=1).measurements
    assert not m.passed and m.check_error == pytest.approx(0.01, rel=1e-3)


def test_windowed_attention_reference():
    shape = harness.Shape.of(
        "attention", "prefill", batch=1, q_len=8, kv_len=12, heads=2, kv_heads=1, head_dim=8, window_size=4
    )
    (m,) = harness.measure([shape], dtype="fp32", warmup=0, repeats=1).measurements
    assert m.passed
    mask = harness._causal_mask(8, 12, 4, "cpu")
    assert mask.sum().item() == 8 * 4  # every query (positions 4..11) sees exactly 4 keys


def test_bench_appends_validated_rows(db):
    run = harness.bench(db, harness.TINY_SHAPES, dtype="bf16", warmup=1, repeats=2)
    assert run.report.total("rows_kept") == 5 and run.report.total("rows_rejected") == 0
    rows = api.query(
        "select op_kind, phase, gpu, library, library_version, dtype, check_status, check_tolerance, latency_us, "
        "heads, kv_len, experts from kernel_measurements order by source_row",
        db=db,
    ).to_pylist()
    assert [r["op_kind"] for r in rows] == ["gemm", "attention", "attention", "rmsnorm", "grouped_gemm"]
    assert {(r["gpu"], r["library"], r["library_version"], r["dtype"]) for r in rows} == {
        ("cpu", "torch", torch.__version__, "bf16")
    }
    assert {r["check_status"] for r in rows} == {"passed"} and {r["check_tolerance"] for r in rows} == {0.03}
    assert rows[2]["kv_len"] == 32 and rows[4]["experts"] == 4
    (source,) = api.query("select origin, environment from kernel_corpus_sources", db=db).to_pylist()
    assert source["origin"] == "archsql-bench" and '"torch": "' in source["environment"]


def test_a_failed_check_is_rejected_not_kept(db, monkeypatch):
    wrong = dataclasses.replace(harness.REFERENCES["rmsnorm"], provider=lambda x, w: x)
    monkeypatch.setitem(harness.REFERENCES, "rmsnorm", wrong)
    run = harness.bench(db, harness.TINY_SHAPES[3:4], dtype="fp32", warmup=0, repeats=1)
    assert run.report.total("rows_kept") == 0
    (rejection,) = run.report.sample
    assert rejection.field == "check_status"
    assert rejection.reason.startswith("output does not match the reference: error ") and "> tolerance 0.0001" in (
        rejection.reason
    )


def test_unknown_dtype_and_op_kind_are_errors():
    with pytest.raises(CorpusError, match="unknown dtype 'bf61'"):
        harness.measure(harness.TINY_SHAPES, dtype="bf61")
    with pytest.raises(CorpusError, match="no reference for: mhc"):
        harness.measure([harness.Shape.of("mhc", tokens=1, hidden=8)])


def test_plan_of_a_decode_step():
    phase, bind = workload("decode_b1_c2k")
    p = plan("Meta-Llama-3.1-8B", phase, bind["B"], bind["s"], bind["c"])
    got = {(s.op_kind, s.describe(), s.count) for s in p.shapes}
    assert got == {
        ("gemm", "k=4096 m=1 n=4096", 64),
        ("gemm", "k=4096 m=1 n=1024", 64),
        ("gemm", "k=4096 m=1 n=14336", 64),
        ("gemm", "k=14336 m=1 n=4096", 32),
        ("gemm", "k=4096 m=1 n=128256", 1),
        ("attention", "batch=1 head_dim=128 heads=32 kv_heads=8 kv_len=2048 q_len=1", 32),
        ("rmsnorm", "hidden=4096 tokens=1", 65),
    }
    assert "softmax" in p.unplanned
    with pytest.raises(CorpusError, match="did you mean 'decode_b1_c2k'"):
        workload("decode_b1_c2")


def test_cli_bench_and_corpus_commands(db, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "bench", "--tiny", "--repeats", "2", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    assert "appended 5 of 5 rows" in result.stdout and "passed" in result.stdout
    result = runner.invoke(cli, ["--db", str(db), "bench", "Meta-Llama-3.1-8B", "--plan"])
    assert result.exit_code == 0 and "k=4096 m=1 n=128256" in result.stdout
    result = runner.invoke(cli, ["--db", str(db), "bench"])
    assert result.exit_code == 2 and "name a MODEL" in result.output
    csv = tmp_path / "m.csv"
    csv.write_text(
        "op_kind,gpu,library,dtype,m,n,k,latency_us\ngemm,H200 SXM,torch,bf16,64,64,64,abc\ngemm,H200 SXM,torch,bf16,64,64,64,5\n",
        encoding="utf-8",
    )
    result = runner.invoke(cli, ["--db", str(db), "corpus", "import", str(csv)])
    assert result.exit_code == 0, result.output
    assert f"{csv}:2 latency_us: not a number (got 'abc')" in result.stderr
    result = runner.invoke(cli, ["--db", str(db), "corpus", "summary", "--format", "csv"])
    assert result.exit_code == 0
    assert (
        result.stdout.splitlines()[0] == "gpu,op_family,library,library_version,measurements,op_kinds,kernels,sources"
    )
    assert "H200 SXM,gemm,torch,,1,1,0,1" in result.stdout
    result = runner.invoke(cli, ["--db", str(db), "corpus", "import", "aiconfigurator", "x.csv"])
    assert result.exit_code == 2 and "Traceback" not in result.output
