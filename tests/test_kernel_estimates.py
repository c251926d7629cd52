"""Measured kernel times with interpolation (issue 15, item 3): kernel_estimates estimates every
kernel signature of the SOL side from the corpus's grid — exact, interpolated, extrapolated
(clamped) or the flagged fallback SOL / typical efficiency — and kernel_estimate_loo measures
the interpolation's leave-one-out error on the corpus itself.

The corpus is a small aiconfigurator-core tree written in the wheel's layout and imported
through the project's importer (as tests/test_measured_vs_sol.py does), so every row passes
the ingest checks.  Each GEMM row is timed at a chosen efficiency e = SOL / measured, where the
SOL of a BF16 GEMM on one H200 SXM (989e12 FLOP/s dense BF16, 4.8e12 B/s HBM) is

    sol(m, n, k) = max(2·m·n·k / 989e12, 2·(m·k + n·k + m·n) / 4.8e12)   (int_kernel_corpus_work)

on the product grid m ∈ {32, 128, 512} × n ∈ {1024, 4096, 16384} × k = 4096 (vLLM 0.10.1):

    e(m, n)     m = 32   m = 128   m = 512
    n = 1024     0.2      0.4       0.5
    n = 4096     0.3      0.6       0.7
    n = 16384    0.4      0.8       0.9

Llama-3.1-8B on one H200 at decode B = 64 runs its GEMMs at m = 64 (B = 1: m = 1); q_proj is
n = k = 4096, gate_proj n = 14336, k = 4096, lm_head n = 128256, k = 4096.  Interpolation is
linear in ln(coordinate): between grid values lo < x < hi the weight of hi is
ln(x / lo) / ln(hi / lo).  Attention is measured only with 64 heads (Llama has 32): its grid
holds no point of Llama's heads, so it falls back."""

from __future__ import annotations

import math
import shutil
import statistics
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archsql.kernel_corpus import import_aiconfigurator
from archsql.kernel_corpus.storage import VIEWS_DIR
from archsql.store import connect, keep_deployments, refresh_store
from archsql.views import check_invariants

MODEL = "Meta-Llama-3.1-8B"
PEAK, HBM = 989e12, 4.8e12  # H200 SXM dense BF16 FLOP/s, HBM B/s
K = 4096
EFFICIENCY = {  # (m, n) -> e at k = 4096, the module docstring's table
    (32, 1024): 0.2, (128, 1024): 0.4, (512, 1024): 0.5,
    (32, 4096): 0.3, (128, 4096): 0.6, (512, 4096): 0.7,
    (32, 16384): 0.4, (128, 16384): 0.8, (512, 16384): 0.9,
}  # fmt: skip
ATTENTION_MS = (0.05, 0.08, 0.3)  # three 64-head decode rows at batch 1, 8 and 64


def sol_s(m: int, n: int, k: int) -> float:
    return max(2.0 * m * n * k / PEAK, 2.0 * (m * k + n * k + m * n) / HBM)


def _gemm(m: int, n: int, e: float) -> dict:
    return {"framework": "VLLM", "version": "0.10.1", "device": "NVIDIA H200", "op_name": "gemm",
            "kernel_source": "vllm-gemm", "gemm_dtype": "bfloat16", "m": m, "n": n, "k": K,
            "latency": sol_s(m, n, K) / e * 1e3}  # fmt: skip


def _attention(batch: int, ms: float) -> dict:
    return {"framework": "VLLM", "version": "0.10.1", "device": "NVIDIA H200", "op_name": "attention",
            "kernel_source": "flash_attn", "batch_size": batch, "isl": 1, "num_heads": 64,
            "num_key_value_heads": 8, "head_dim": 128, "beam_width": 1, "attn_dtype": "bfloat16",
            "kv_cache_dtype": "bfloat16", "step": 2047, "window_size": 0, "latency": ms}  # fmt: skip


def _write(root: Path, rel: str, rows: list[dict]) -> None:
    path = root / "aiconfigurator_core" / "systems" / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture(scope="module")
def db(store_of, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "aiconfigurator_core-0.12.0.dist-info").mkdir()
    _write(root, "h200_sxm/gemm/vllm/0.10.1/gemm_perf.parquet", [_gemm(m, n, e) for (m, n), e in EFFICIENCY.items()])
    _write(root, "h200_sxm/attention/vllm/0.10.1/generation_attention_perf.parquet",
           [_attention(b, ms) for b, ms in zip((1, 8, 64), ATTENTION_MS, strict=True)])  # fmt: skip
    path = tmp_path_factory.mktemp("store") / "store.duckdb"
    shutil.copy(store_of(MODEL), path)
    with duckdb.connect(str(path)) as con:  # only what the tests ask about
        keep_deployments(con, ["1xH200-single"])
        con.execute("delete from workloads where workload not in ('decode_b1_c2k', 'decode_b64_c2k')")
    refresh_store(path)
    report = import_aiconfigurator(path, location=root)
    assert report.total("rows_rejected") == 0, [r.render() for r in report.sample]
    return path


def rows(db: Path, sql: str) -> list[dict]:
    with connect(db) as con:
        return con.sql(sql).to_arrow_table().to_pylist()


def estimate(db: Path, op_kind: str, **shape: int) -> dict:
    where = " and ".join(f"{f} = {v}" for f, v in shape.items())
    (row,) = rows(db, f"select * from kernel_estimates where op_kind = '{op_kind}' and library = 'vllm' and {where}")
    return row


def test_an_m_between_two_measured_m_is_interpolated(db):
    """q_proj at m = 64, n = k = 4096: between m = 32 and m = 128 on the n = 4096 line, the
    weight of m = 128 is ln(64 / 32) / ln(128 / 32) = ln 2 / ln 4 = 1/2, so
    e = 0.3 + (0.6 − 0.3) · 1/2 = 0.45 and the time is sol(64, 4096, 4096) / 0.45."""
    got = estimate(db, "gemm", m=64, n=4096, k=4096)
    assert (got["method"], got["axes"], got["corners"], got["fallback"]) == ("interpolated", "m", 2, False)
    assert got["library_version"] == "0.10.1"
    assert got["efficiency"] == pytest.approx(0.45)
    assert got["sol_us"] == pytest.approx(sol_s(64, 4096, 4096) * 1e6)
    assert got["latency_us"] == pytest.approx(sol_s(64, 4096, 4096) / 0.45 * 1e6)


def test_an_n_between_two_measured_shapes_takes_their_efficiency_times_its_sol(db):
    """gate_proj at m = 64, n = 14336, k = 4096: no grid shape has n = 14336.  Along m as above
    (weight 1/2): e(64, 4096) = 0.45, e(64, 16384) = (0.4 + 0.8) / 2 = 0.6.  Along n the weight
    of 16384 is t = ln(14336 / 4096) / ln(16384 / 4096) = ln 3.5 / ln 4 ≈ 0.9037, so
    e = 0.45 + (0.6 − 0.45) · t ≈ 0.5856: the neighbouring shapes' efficiency (bilinear in
    ln m, ln n) applied to this shape's own SOL."""
    t = math.log(3.5) / math.log(4)
    e = 0.45 + (0.6 - 0.45) * t
    got = estimate(db, "gemm", m=64, n=14336, k=4096)
    assert (got["method"], got["axes"], got["corners"]) == ("interpolated", "m, n", 4)
    assert got["efficiency"] == pytest.approx(e)
    assert got["latency_us"] == pytest.approx(sol_s(64, 14336, 4096) / e * 1e6)


def test_outside_the_grid_is_extrapolated_with_the_nearest_points_efficiency(db):
    """lm_head at m = 64, n = 128256 > 16384, the grid's largest n: n is clamped to 16384, whose
    efficiency at m = 64 is (0.4 + 0.8) / 2 = 0.6.  q_proj at decode B = 1 (m = 1 < 32): m is
    clamped to 32, e = e(32, 4096) = 0.3.  down_proj (k = 14336 > 4096): k clamped."""
    head = estimate(db, "gemm", m=64, n=128256, k=4096)
    assert (head["method"], head["axes"], head["fallback"]) == ("extrapolated", "m, n", False)
    assert head["efficiency"] == pytest.approx(0.6)
    assert head["latency_us"] == pytest.approx(sol_s(64, 128256, 4096) / 0.6 * 1e6)
    one = estimate(db, "gemm", m=1, n=4096, k=4096)
    assert (one["method"], one["axes"], one["corners"]) == ("extrapolated", "m", 1)
    assert one["efficiency"] == pytest.approx(0.3)
    down = estimate(db, "gemm", m=64, n=4096, k=14336)
    assert (down["method"], down["axes"]) == ("extrapolated", "m, k")
    assert down["efficiency"] == pytest.approx(0.45)


def test_a_signature_without_neighbours_falls_back_and_is_flagged(db):
    """Llama's decode attention (32 heads) has no grid: the corpus measured 64 heads only.  Its
    estimate is SOL / the median efficiency of the library's BF16 attention points (of three
    points, the middle one), flagged."""
    points = rows(db, "select efficiency from int_kernel_grid_points where op_kind = 'attention'")
    assert len(points) == 3
    typical = statistics.median(r["efficiency"] for r in points)
    got = estimate(db, "attention", batch=64, kv_len=2048)
    assert (got["method"], got["fallback"], got["axes"], got["library_version"]) == (
        "sol × efficiency",
        True,
        None,
        None,
    )
    assert got["efficiency"] == pytest.approx(typical)
    assert got["latency_us"] == pytest.approx(got["sol_us"] / typical)


def test_leave_one_out_on_three_points(db):
    """The n = 4096 line, m = 32, 128, 512 (e = 0.3, 0.6, 0.7), each left out along m:
    m = 128 between its neighbours: weight of 512 = ln(128 / 32) / ln(512 / 32) = 2/4, so
    e' = 0.3 + (0.7 − 0.3) / 2 = 0.5 and the estimate is sol / 0.5 against the measured sol /
    0.6: error = 0.6 / 0.5 − 1 = +0.2.  The ends take their one neighbour's efficiency
    (extrapolated): m = 32: 0.3 / 0.6 − 1 = −0.5; m = 512: 0.7 / 0.6 − 1 = +1/6."""
    got = {
        r["key"][2]: r
        for r in rows(
            db,
            "select * from kernel_estimate_loo where op_kind = 'gemm' and axis = 'm' and key[4] = '4096'",
        )
    }
    assert {m: (r["method"], r["error"]) for m, r in got.items()} == {
        "32": ("extrapolated", pytest.approx(-0.5)),
        "128": ("interpolated", pytest.approx(0.2)),
        "512": ("extrapolated", pytest.approx(1 / 6)),
    }
    mid = got["128"]
    assert mid["measured_us"] == pytest.approx(sol_s(128, 4096, K) / 0.6 * 1e6)
    assert mid["estimated_us"] == pytest.approx(sol_s(128, 4096, K) / 0.5 * 1e6)


def test_exact_signatures_and_invariants(db):
    """A signature on the grid is its measurement; the corpus views' sidecar invariants hold."""
    exact = rows(db, "select * from kernel_estimates where method = 'exact'")
    assert exact == []  # Llama at m = 1 / 64 is nowhere on this grid
    with connect(db) as con:
        assert check_invariants(con, VIEWS_DIR) == []
