"""Each op's peak follows its own math dtype (issue 12 item 7) — against hand derivations.

DeepSeek-V3 on ``8xH200-tp8-ep8-wfp8`` (weights in the fp8 profile: FP8 128×128 blocks for the
linear layers and experts; routers, lm_head, embeddings and norms as the checkpoint stores them,
BF16; activations and KV cache BF16) at ``prefill_8k`` (batch 1, 8192 new tokens).

Peaks: archsql/gpus/gpus.csv, H200 SXM row — 989 TFLOP/s dense BF16, 1978 dense FP8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsql.evaluator.primitives.base import MATH_CLASSES, op_math_table, registry
from archsql.store import connect

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
H200_BF16 = 989e12  # dense BF16 FLOP/s
H200_FP8 = 1978e12  # dense FP8 FLOP/s
MODEL, DEPLOYMENT, WORKLOAD, TP = "DeepSeek-V3", "8xH200-tp8-ep8-wfp8", "prefill_8k", 8
S = 8192  # tokens of prefill_8k (batch 1)


@pytest.fixture(scope="module")
def cfg():
    return json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())


@pytest.fixture(scope="module")
def con(models_db):
    return connect(models_db)


def _op(con, uid, deployment=DEPLOYMENT, workload=WORKLOAD):
    row = con.execute(
        "select flops, math_class, math_dtype, peak_flops_per_s, compute_s, memory_s, time_s, bound from op_sol "
        "where model = ? and deployment = ? and workload = ? and uid = ?",
        [MODEL, deployment, workload, uid],
    ).fetchone()
    assert row is not None, uid
    return dict(
        zip(("flops", "math_class", "dtype", "peak", "compute_s", "memory_s", "time_s", "bound"), row, strict=True)
    )


def test_attention_score_runs_at_the_bf16_rate_not_the_weights_fp8(con, cfg):
    """q·kᵀ of the 58 MoE layers (61 − first_k_dense_replace 3): per device 128/8 = 16 heads,
    d = qk_nope 128 + qk_rope 64 = 192, causal pairs 8192·8193/2; FLOPs 2·16·192·pairs·58.
    Both operands are BF16 activations / KV (kv dtype bf16): priced at 989 TFLOP/s, not at
    the FP8 peak the weight profile would give."""
    layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    heads = cfg["num_attention_heads"] // TP
    d = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    flops = 2 * heads * d * (S * (S + 1) // 2) * layers
    op = _op(con, "decoder/moe/self_attn.scores")
    assert op["flops"] == pytest.approx(flops, rel=1e-12)
    assert (op["math_class"], op["dtype"]) == ("activation_gemm", "bf16")
    assert op["compute_s"] == pytest.approx(flops / H200_BF16, rel=1e-9)  # 12.09 ms
    assert op["compute_s"] > 1.9 * flops / H200_FP8
    # the same op on the BF16-weight deployment of the same GPUs takes the same compute time
    assert _op(con, "decoder/moe/self_attn.scores", "8xH200-tp8-ep8")["compute_s"] == pytest.approx(op["compute_s"])


def test_fp8_linear_runs_at_the_fp8_rate(con, cfg):
    """o_proj of the 58 MoE layers, row-parallel under TP8: in = 128 heads · v_head 128 = 16384
    split 8 ways, out = hidden 7168; FLOPs 2·8192·2048·7168·58.  Its weight is FP8-block in the
    fp8 profile and vLLM quantizes the BF16 activations per token group to FP8 for it
    (Fp8LinearMethod → apply_fp8_block_linear): priced at 1978 TFLOP/s."""
    layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    flops = 2 * S * (cfg["num_attention_heads"] * cfg["v_head_dim"] // TP) * cfg["hidden_size"] * layers
    op = _op(con, "decoder/moe/self_attn.o_proj")
    assert op["flops"] == pytest.approx(flops, rel=1e-12)
    assert (op["math_class"], op["dtype"]) == ("weight_gemm", "fp8")
    assert op["compute_s"] == pytest.approx(flops / H200_FP8, rel=1e-9)  # 7.05 ms


def test_unquantized_router_runs_at_the_bf16_rate(con, cfg):
    """The router (mlp.gate) stays BF16 in the fp8 profile, so its GEMM runs in BF16: FLOPs
    2·8192·7168·256 experts·58 layers (replicated: every rank scores every token)."""
    layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    flops = 2 * S * cfg["hidden_size"] * cfg["n_routed_experts"] * layers
    op = _op(con, "decoder/moe/mlp.gate")
    assert op["flops"] == pytest.approx(flops, rel=1e-12)
    assert (op["math_class"], op["dtype"]) == ("weight_gemm", "bf16")
    assert op["compute_s"] == pytest.approx(flops / H200_BF16, rel=1e-9)


def test_rmsnorm_is_not_priced_at_a_tensor_core_rate(con):
    """An RMSNorm is vector work; the GPU table has no CUDA-core rate, so it has no peak and no
    compute time: its time is its bytes over HBM bandwidth."""
    op = _op(con, "decoder/moe/input_layernorm")
    assert op["flops"] > 0
    assert (op["math_class"], op["dtype"], op["peak"], op["compute_s"]) == ("vector", None, None, None)
    assert op["bound"] == "memory" and op["time_s"] == pytest.approx(op["memory_s"])


def test_no_vector_op_anywhere_gets_a_tensor_core_peak(con):
    rows = con.execute(
        "select distinct op from op_sol where math_class = 'vector' and (peak_flops_per_s is not null or compute_s is not null)"
    ).fetchall()
    assert rows == []
    assert con.execute("select count(*) from op_sol where math_class is null").fetchone()[0] == 0


def test_every_primitive_declares_a_math_class():
    table = dict(zip(*op_math_table().to_pydict().values(), strict=True))
    assert set(registry()) <= set(table)
    assert set(table.values()) <= set(MATH_CLASSES)
    assert table["linear"] == table["expert_linear"] == table["lm_head"] == table["router"] == "weight_gemm"
    assert table["attention_score"] == table["attention_apply"] == "activation_gemm"
    assert table["rmsnorm"] == table["softmax"] == table["rope"] == table["topk"] == table["silu"] == "vector"
