"""benchmarks/bench_silicon.py's residual classes and outlier groups (issue 15): which class a
scored row falls in, and each class's share of the check half's MAPE, worked by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_silicon.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_silicon", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(**kw) -> dict:
    base = dict(
        backend="vllm",
        backend_version="0.12.0",
        system="h200_sxm",
        gemm_quant_mode="fp8",
        tp_size="8.0",
        split_hash="1",  # odd: the check half
        aic_comparable="True",
        silicon_ttft_ms="100",
        silicon_tpot_ms="10",
    )
    return base | kw


def scored(r: dict, ttft_ms: float, tpot_ms: float = 10.0, **est) -> dict:
    base = dict(
        concurrency=4,
        dp=1,
        admitted_requests=4,
        rank_requests=4,
        kv_requests=100,
        ttft_s=ttft_ms / 1e3,
        tpot_s=tpot_ms / 1e3,
    )
    return {"row": r, "est": base | est}


def test_outlier_groups_are_named_by_what_the_row_records(bench):
    fp4 = row(backend="sglang", system="b200_sxm", gemm_quant_mode="nvfp4", backend_version="")
    assert bench.outlier(fp4) == "SGLang B200 NVFP4, no version"
    # the same runs with a recorded version are not in the group
    assert bench.outlier(fp4 | {"backend_version": "0.5.9"}) is None
    assert bench.outlier(row(system="gb200", backend="trtllm", tp_size="64.0")) == "DeepSeek-R1, 64 GB200, TP 64"
    assert bench.outlier(row(system="gb200", backend="trtllm", tp_size="2.0")) is None
    assert bench.outlier(row()) is None
    # every group states its reason
    assert all(len(why) > 40 for _, _, why in bench.OUTLIERS)


def test_error_class_takes_the_first_class_a_row_matches(bench):
    sglang = row(backend="sglang", backend_version="0.5.9")
    assert bench.error_class(scored(sglang, 100, concurrency=8)) == "other"
    assert bench.error_class(scored(sglang, 100, concurrency=16)) == "SGLang, C > 8"
    trt = row(backend="trtllm", backend_version="1.2.0rc2")
    assert bench.error_class(scored(trt, 100, dp=4)) == "TRT-LLM, attention DP"
    # 100 KV slots for 80 clients: within 1.5x of the capacity; 0: the KV cache limits nothing
    assert (
        bench.error_class(scored(trt, 100, rank_requests=80, admitted_requests=80))
        == "near KV capacity (< 1.5 × clients)"
    )
    assert bench.error_class(scored(trt, 100, rank_requests=80, admitted_requests=80, kv_requests=0)) == "other"
    assert bench.error_class(scored(trt, 100, rank_requests=80, admitted_requests=60)).startswith("near KV")
    # an outlier group comes first, whatever else the row is
    fp4 = row(backend="sglang", system="b200_sxm", gemm_quant_mode="nvfp4", backend_version="")
    assert bench.error_class(scored(fp4, 100, concurrency=64)) == "outlier: SGLang B200 NVFP4, no version"


def test_error_classes_split_the_check_half_mape_by_hand(bench, capsys):
    """Four check-half rows, measured TTFT 100 ms each, estimated 110, 70, 150 and 300 ms:
    absolute errors 0.1, 0.3, 0.5, 2.0, MAPE (0.1 + 0.3 + 0.5 + 2.0) / 4 = 72.5 %.  The class
    shares are each class's summed error over all four rows: other (0.1 + 0.3) / 4 = 10.0 points,
    SGLang C > 8 0.5 / 4 = 12.5, the outlier 2.0 / 4 = 50.0; they add up to the half's 72.5.  A
    fit-half row (split_hash even) is left out."""
    sglang = row(backend="sglang", backend_version="0.5.9")
    fp4 = row(backend="sglang", system="b200_sxm", gemm_quant_mode="nvfp4", backend_version="")
    questions = [
        scored(row(), 110),
        scored(row(), 70),
        scored(sglang, 150, concurrency=16),
        scored(fp4, 300),
        scored(row(split_hash="2"), 1000),
    ]
    bench.error_classes(questions)
    out = {line[:44].strip(): line[44:].split() for line in capsys.readouterr().out.splitlines()[2:6]}
    # columns: n, TTFT MAPE, median e/m, TTFT points, TPOT MAPE, TPOT points
    assert out["outlier: SGLang B200 NVFP4, no version"][:4] == ["1", "200.0", "3.00", "50.0"]
    assert out["SGLang, C > 8"][:4] == ["1", "50.0", "1.50", "12.5"]
    assert out["other"][:4] == ["2", "20.0", "1.10", "10.0"]
    assert out["all"][:4] == ["4", "72.5", "1.50", "72.5"]
