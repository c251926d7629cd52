"""The measurement harness (PyTorch eager references on the CPU, tiny shapes) and the plan.

Plan of Meta-Llama-3.1-8B (archsql/specs/configs/meta-llama__Meta-Llama-3.1-8B.json:
hidden 4096, 32 query / 8 KV heads of 128, intermediate 14336, vocab 128256, 32 layers) for
one decode step of 1 request at 2048 tokens of context (workload decode_b1_c2k) on one GPU
(deployment 1xH200-single):

* GEMMs (m = 1 token): q_proj and o_proj 4096→4096 (2 per layer: 64 launches), k_proj and
  v_proj 4096→1024 (64), gate_proj and up_proj 4096→14336 (64), down_proj 14336→4096 (32),
  lm_head 4096→128256 (1);
* attention: batch 1, q_len 1, kv_len 2048, 32 heads, 8 KV heads, head_dim 128 (32);
* RMSNorm over 4096 for 1 token: 2 per layer + the final norm = 65.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import shutil
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import CorpusError
from archsql.kernel_corpus import open_corpus
from archsql.kernel_corpus import providers as provider_registry
from archsql.kernel_corpus.plan import plan

torch = pytest.importorskip("torch")

from archsql.kernel_corpus import harness  # noqa: E402  (needs torch)


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


def test_plan_of_a_decode_step(store_of):
    # default deployment 1xH200-single; the run's shared store of the model (without one a plan
    # builds a temporary store: test_cli_bench_and_corpus_commands plans through that path)
    p = plan("Meta-Llama-3.1-8B", "decode_b1_c2k", db=store_of("Meta-Llama-3.1-8B"))
    assert (p.phase, p.bind) == ("decode", {"B": 1, "s": 1, "c": 2048})
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
    # softmax and the apply run inside the attention kernel; element-wise ops are not planned
    assert "softmax" not in p.unplanned and p.unplanned["silu"] == 1 and p.unplanned["rope"] == 2
    with pytest.raises(CorpusError, match="did you mean 'decode_b1_c2k'"):
        plan("Meta-Llama-3.1-8B", "decode_b1_c2")


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


# -- providers: optional libraries, checked against the same reference ----------------------

FAKE_MODULE = "archsql_fake_kernels"


@pytest.fixture
def fake_library(monkeypatch):
    """A library module that exists only in sys.modules: a correct GEMM and RMSNorm, and a
    GEMM that is 2 % off; providers over it are registered for the test and removed after."""
    module = types.ModuleType(FAKE_MODULE)
    module.__spec__ = importlib.machinery.ModuleSpec(FAKE_MODULE, None)
    module.__version__ = "9.9.1"
    module.linear = lambda x, w: torch.nn.functional.linear(x, w)
    module.wrong_linear = lambda x, w: torch.nn.functional.linear(x, w) * 1.02
    module.rms_norm = lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, harness.RMS_EPS)
    monkeypatch.setitem(sys.modules, FAKE_MODULE, module)
    registered = []

    def add(name, kernels, devices=("cpu",)):
        registered.append(provider_registry.register(
            provider_registry.Provider(name, FAKE_MODULE, None, kernels, devices)
        ))  # fmt: skip

    yield add
    for p in registered:
        provider_registry.unregister(p.name)


def _kernel(op_kind, name, fn, dtypes=("fp32", "bf16")):
    return provider_registry.ProviderKernel(
        op_kind, name, dtypes, lambda mod, shape, inputs, dev: lambda: fn(mod)(*inputs)
    )


def test_a_provider_that_agrees_is_measured_and_stamped(db, fake_library):
    fake_library("fakelib", (
        _kernel("gemm", "fakelib.linear", lambda m: m.linear),
        _kernel("rmsnorm", "fakelib.rms_norm", lambda m: m.rms_norm, dtypes=("fp32",)),
    ))  # fmt: skip
    run = harness.bench(db, harness.TINY_SHAPES, dtype="bf16", warmup=0, repeats=1)
    uses = {p.name: p for p in run.providers}
    assert (uses["fakelib"].used, uses["fakelib"].version, uses["fakelib"].measured) == (True, "9.9.1", 1)
    # the RMSNorm kernel takes fp32 only; attention and grouped GEMM it has none of
    assert {(s.provider, s.shape.op_kind, s.reason) for s in run.skips if s.provider == "fakelib"} == {
        ("fakelib", "rmsnorm", "fakelib.rms_norm takes fp32, not bf16"),
        ("fakelib", "attention", "no attention prefill kernel"),
        ("fakelib", "attention", "no attention decode kernel"),
        ("fakelib", "grouped_gemm", "no grouped_gemm kernel"),
    }
    assert run.report.total("rows_kept") == 6 and run.report.total("rows_rejected") == 0
    rows = api.query(
        "select library, library_version, kernel, check_status, check_tolerance from kernel_measurements "
        "where op_kind = 'gemm' order by library",
        db=db,
    ).to_pylist()
    assert rows == [
        {"library": "fakelib", "library_version": "9.9.1", "kernel": "fakelib.linear", "check_status": "passed",
         "check_tolerance": 0.03},
        {"library": "torch", "library_version": torch.__version__, "kernel": "torch.nn.functional.linear",
         "check_status": "passed", "check_tolerance": 0.03},
    ]  # fmt: skip
    (env,) = api.query("select environment from kernel_corpus_sources", db=db).to_pylist()
    assert '"providers": {"fakelib": "9.9.1", "torch": "' in env["environment"]


def test_a_provider_that_disagrees_is_rejected_not_kept(db, fake_library):
    fake_library("offlib", (_kernel("gemm", "offlib.wrong_linear", lambda m: m.wrong_linear),))
    run = harness.bench(db, harness.TINY_SHAPES[:1], dtype="fp32", warmup=0, repeats=1)
    off = next(m for m in run.measurements if m.library == "offlib")
    assert not off.passed and off.check_error == pytest.approx(0.02, rel=1e-3)
    assert {p.name: (p.measured, p.failed) for p in run.providers if p.used} == {"torch": (1, 0), "offlib": (1, 1)}
    assert run.report.total("rows_kept") == 1 and run.report.total("rows_rejected") == 1
    (rejection,) = run.report.sample
    assert (rejection.source_row, rejection.field) == (1, "check_status")
    assert rejection.reason.startswith("output does not match the reference: error 0.02 > tolerance 0.0001")
    kept = api.query("select library from kernel_measurements", db=db).to_pylist()
    assert kept == [{"library": "torch"}]


def test_unavailable_and_failing_providers_are_skipped_with_the_reason(fake_library):
    fake_library("gpuonly", (_kernel("gemm", "gpuonly.linear", lambda m: m.linear),), devices=("cuda",))
    provider_registry.register(provider_registry.Provider(
        "absent", "archsql_no_such_module", "archsql-no-such-dist", (_kernel("gemm", "absent.gemm", None),)
    ))  # fmt: skip
    try:
        fake_library("crashing", (_kernel("gemm", "crashing.gemm", lambda m: m.not_there),))
        run = harness.measure(harness.TINY_SHAPES[:1], dtype="fp32", warmup=0, repeats=1)
    finally:
        provider_registry.unregister("absent")
    uses = {p.name: p for p in run.providers}
    assert uses["gpuonly"].reason == "runs on cuda, not on cpu" and not uses["gpuonly"].used
    assert uses["absent"].reason == (
        "not installed: no module 'archsql_no_such_module' (pip install archsql-no-such-dist)"
    )
    for real in ("flashinfer", "flash-attn", "deep-gemm"):  # none installed here
        assert uses[real].reason.startswith("not installed: no module"), uses[real]
    (crash,) = [s for s in run.skips if s.provider == "crashing"]
    assert crash.reason.startswith("crashing.gemm raised AttributeError:")
    assert [m.library for m in run.measurements] == ["torch"]


def test_provider_selection_and_unknown_names(fake_library):
    fake_library("fakelib", (_kernel("gemm", "fakelib.linear", lambda m: m.linear),))
    run = harness.measure(harness.TINY_SHAPES[:1], warmup=0, repeats=1, providers=["fakelib"])
    assert [p.name for p in run.providers] == ["torch", "fakelib"]  # the reference always runs
    with pytest.raises(CorpusError) as info:
        harness.measure(harness.TINY_SHAPES[:1], providers=["flashinfr"])
    assert info.value.issues[0].hint == "did you mean 'flashinfer'?"


def test_cli_bench_lists_providers_used_and_skipped(db):
    result = CliRunner().invoke(
        cli, ["--db", str(db), "bench", "--tiny", "--repeats", "1", "--warmup", "0", "--no-append"]
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "torch │ " + torch.__version__ + " │ used │ 5 │ 0" in out
    assert (
        "flashinfer │ │ skipped │ 0 │ 0 │ not installed: no module 'flashinfer' (pip install flashinfer-python)" in out
    )
    result = CliRunner().invoke(cli, ["--db", str(db), "bench", "--tiny", "--provider", "nope"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "unknown provider 'nope'" in result.output and "known providers: deep-gemm, flash-attn" in result.output


def _attend(q, k, v, window_left):
    """Emulated library attention, [s, h, d] × [c, kvh, d]: bottom-right causal (query i is
    at position c - s + i), keys within window_left before it (-1: all), GQA by head groups."""
    s, h, _ = q.shape
    c, kvh, _ = k.shape
    k, v = k.repeat_interleave(h // kvh, dim=1).float(), v.repeat_interleave(h // kvh, dim=1).float()
    scores = torch.einsum("shd,chd->hsc", q.float(), k) / q.shape[-1] ** 0.5
    pos = torch.arange(c - s, c).unsqueeze(1)
    key = torch.arange(c).unsqueeze(0)
    keep = (key <= pos) & ((pos - key <= window_left) if window_left >= 0 else True)
    out = torch.einsum("hsc,chd->shd", torch.softmax(scores.masked_fill(~keep, float("-inf")), -1), v)
    return out.to(q.dtype)


def _emulated_libraries() -> dict[str, types.ModuleType]:
    """Modules behaving as FlashInfer, flash-attn and DeepGEMM document their calls (layouts,
    causal alignment, window, paging), in plain torch on the CPU: they exercise the real
    provider adapters, not the libraries."""
    fi = types.ModuleType("emulated_flashinfer")

    class Prefill:
        def __init__(self, workspace, layout):
            assert layout == "NHD"

        def plan(self, qo_indptr, kv_indptr, h, kvh, d, head_dim_vo=None, causal=False, window_left=-1, **kw):
            assert causal
            self.qo, self.kv, self.window = qo_indptr.tolist(), kv_indptr.tolist(), window_left

        def run(self, q, k, v):
            return torch.cat([
                _attend(q[a:b], k[c:e], v[c:e], self.window)
                for a, b, c, e in zip(self.qo, self.qo[1:], self.kv, self.kv[1:], strict=False)
            ])  # fmt: skip

    class Decode:
        def __init__(self, workspace, layout):
            assert layout == "NHD"

        def plan(self, indptr, indices, last_page_len, h, kvh, d, page_size, window_left=-1, **kw):
            self.indptr, self.indices, self.last = indptr.tolist(), indices, last_page_len.tolist()
            self.page, self.window = page_size, window_left

        def run(self, q, cache):
            k_cache, v_cache = cache
            outs = []
            for r in range(q.shape[0]):
                pages = self.indices[self.indptr[r] : self.indptr[r + 1]]
                n = (len(pages) - 1) * self.page + self.last[r]
                k = k_cache[pages].flatten(0, 1)[:n]
                v = v_cache[pages].flatten(0, 1)[:n]
                outs.append(_attend(q[r : r + 1], k, v, self.window))
            return torch.cat(outs)

    fi.BatchPrefillWithRaggedKVCacheWrapper, fi.BatchDecodeWithPagedKVCacheWrapper = Prefill, Decode
    fi.norm = types.SimpleNamespace(rmsnorm=lambda x, w, eps: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps))

    fa = types.ModuleType("emulated_flash_attn")

    def flash_attn_func(q, k, v, causal, window_size):
        assert causal and window_size[1] == 0
        return torch.stack([_attend(q[b], k[b], v[b], window_size[0]) for b in range(q.shape[0])])

    def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, causal, window_size):
        n = cache_seqlens.tolist()
        return torch.stack(
            [_attend(q[b], k_cache[b, : n[b]], v_cache[b, : n[b]], window_size[0]) for b in range(q.shape[0])]
        )

    fa.flash_attn_func, fa.flash_attn_with_kvcache = flash_attn_func, flash_attn_with_kvcache

    dg = types.ModuleType("emulated_deep_gemm")
    dg.bf16_gemm_nt = lambda a, b, d: d.copy_(a.float() @ b.float().T)
    return {"flashinfer": fi, "flash-attn": fa, "deep-gemm": dg}


def test_the_library_adapters_against_emulated_libraries(monkeypatch):
    """The real FlashInfer / flash-attn / DeepGEMM adapters (layouts, causal alignment,
    window, paging), run on the CPU over emulated modules: their outputs pass the reference
    check.  The libraries themselves are not exercised here (no GPU)."""
    shapes = [
        *harness.TINY_SHAPES,
        harness.Shape.of(
            "attention", "prefill", batch=2, q_len=8, kv_len=40, heads=4, kv_heads=2, head_dim=16, window_size=12
        ),
        harness.Shape.of(
            "attention", "decode", batch=3, q_len=1, kv_len=37, heads=4, kv_heads=1, head_dim=16, window_size=20
        ),
        harness.Shape.of("gemm", m=4, n=64, k=128),
    ]
    names = []
    for real in (provider_registry.FLASHINFER, provider_registry.FLASH_ATTN, provider_registry.DEEP_GEMM):
        module = _emulated_libraries()[real.name]
        name = f"emulated-{real.name}"
        module.__spec__ = importlib.machinery.ModuleSpec(name.replace("-", "_"), None)
        monkeypatch.setitem(sys.modules, module.__spec__.name, module)
        provider_registry.register(
            dataclasses.replace(real, name=name, module=module.__spec__.name, distribution=None, devices=("cpu",),
                                min_capability=None)
        )  # fmt: skip
        names.append(name)
    try:
        run = harness.measure(shapes, dtype="bf16", warmup=0, repeats=1, providers=names)
    finally:
        for name in names:
            provider_registry.unregister(name)
    got = {(m.library, m.shape.op_kind, m.shape.phase, m.shape.get("window_size")): m for m in run.measurements}
    for key in [
        ("emulated-flashinfer", "attention", "prefill", None),
        ("emulated-flashinfer", "attention", "prefill", 12),
        ("emulated-flashinfer", "attention", "decode", None),
        ("emulated-flashinfer", "attention", "decode", 20),
        ("emulated-flashinfer", "rmsnorm", None, None),
        ("emulated-flash-attn", "attention", "prefill", 12),
        ("emulated-flash-attn", "attention", "decode", 20),
        ("emulated-deep-gemm", "gemm", None, None),
    ]:
        assert got[key].passed, (key, got[key].check_error)
    # DeepGEMM needs k a multiple of 128: the tiny 8 × 32 × 64 GEMM is skipped, with the reason
    assert ("emulated-deep-gemm", "gemm k=64 m=8 n=32", "needs k a multiple of 128 and n of 64") in {
        (s.provider, f"{s.shape.op_kind} {s.shape.describe()}", s.reason) for s in run.skips
    }
