"""The measured join at the granularity a framework launches (issue 14, item 4):
measured_vs_kernels / step_kernel_measured join the corpus with launched_signatures — vLLM's
merged QKV GEMM as one GEMM of n = q + k + v, its merged gate_up as one of n = 2·f — where
measured_vs_sol, op by op, finds only the separate projections.

The corpus is a small aiconfigurator-core tree written in the wheel's layout and imported
through the project's importer (as tests/test_measured_vs_sol.py does).  Llama-3.1-8B
(hidden 4096, 32 heads, 8 KV heads of 128, intermediate 14336, 32 layers) on one H200 at
decode B = 64: m = 64 tokens;
    merged QKV   n = (32 + 8 + 8) · 128 = 6144, k = 4096
    merged gate_up  n = 2 · 14336 = 28672, k = 4096
    q_proj alone n = 4096, k = 4096 (the only separate projection the corpus holds)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archsql.kernel_corpus import import_aiconfigurator
from archsql.store import connect, freshness, refresh

PEAK, HBM = 989e12, 4.8e12  # H200 BF16 dense FLOP/s, HBM B/s
M = 64
QKV, GATE_UP, Q = (M, 6144, 4096), (M, 28672, 4096), (M, 4096, 4096)


def gemm_ms(m: int, n: int, k: int) -> float:
    """3 × the GEMM's roofline bound, so the importer's MFU / MBU checks keep the row."""
    return round(3.0 * max(2.0 * m * n * k / PEAK, 2.0 * (m * k + n * k + m * n) / HBM) * 1e3, 6)


def _gemm(m: int, n: int, k: int) -> dict:
    return {"framework": "VLLM", "version": "0.10.1", "device": "NVIDIA H200", "op_name": "gemm",
            "kernel_source": "vllm-gemm", "gemm_dtype": "bfloat16", "m": m, "n": n, "k": k,
            "latency": gemm_ms(m, n, k)}  # fmt: skip


@pytest.fixture(scope="module")
def db(store_of, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "aiconfigurator_core-0.12.0.dist-info").mkdir()
    path = root / "aiconfigurator_core" / "systems" / "data" / "h200_sxm/gemm/vllm/0.10.1/gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([_gemm(*QKV), _gemm(*GATE_UP), _gemm(*Q)]), path)
    db = tmp_path_factory.mktemp("store") / "store.duckdb"
    shutil.copy(store_of("Meta-Llama-3.1-8B"), db)
    with duckdb.connect(str(db)) as con:  # only what the test asks about
        con.execute("delete from deployment_frameworks where deployment <> '1xH200-single'")
        con.execute("delete from deployment_mesh where deployment <> '1xH200-single'")
        con.execute("delete from deployments where deployment <> '1xH200-single'")
        con.execute("delete from workloads where workload <> 'decode_b64_c2k'")
    report = import_aiconfigurator(db, location=root)
    assert report.total("rows_rejected") == 0, [r.render() for r in report.sample]
    # the derived tables computed once over the cut store and the corpus (the views' own SQL,
    # as a build does): the four reads below are then table scans, not the chain run again
    with duckdb.connect(str(db)) as con:
        refresh(con)
    return db


def _rows(db: Path, sql: str) -> list[tuple]:
    with connect(db) as con:  # read-only, reading the fresh derived tables
        assert freshness(con).fresh
        return con.execute(sql).fetchall()


def test_merged_gemms_are_measured_as_the_framework_launches_them(db):
    where = "model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single' and workload = 'decode_b64_c2k'"
    by_op = dict(
        _rows(db, f"select uid, status from measured_vs_sol where {where} and policy = 'envelope' and op_kind = 'gemm'")
    )
    d = "decoder/dense/"
    assert by_op[d + "self_attn.q_proj"] == "measured"
    assert {by_op[d + u] for u in ("self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")} == {
        "no measurement"
    }
    launched = {
        rule: (n, status, latency)
        for rule, n, status, latency in _rows(
            db,
            "select m.rule, s.n, m.status, m.latency_us from measured_vs_kernels as m inner join launched_signatures as s"
            " using (model, deployment, workload, framework, version, uid)"
            f" where m.{where.replace(' and ', ' and m.')} and m.framework = 'vllm' and m.version = '0.11'"
            " and m.policy = 'envelope' and m.rule in ('merged_qkv_projection', 'merged_gate_up_projection')",
        )
    }
    assert launched == {
        "merged_qkv_projection": (6144, "measured", pytest.approx(gemm_ms(*QKV) * 1e3)),
        "merged_gate_up_projection": (28672, "measured", pytest.approx(gemm_ms(*GATE_UP) * 1e3)),
    }
    # the launched step covers more of its speed-of-light time than the step op by op
    (before,) = _rows(db, f"select sol_of_measured_s / sol_s from step_measured where {where} and policy = 'envelope'")
    (after,) = _rows(
        db,
        f"select coverage from step_kernel_measured where {where} and framework = 'vllm' and version = '0.11'"
        " and policy = 'envelope'",
    )
    assert after[0] > before[0] > 0
