"""MoE accounting derived by hand from the configs (issue 12, items 1 and 4).

Rule (item 1): a routed-expert node reads, per step, the weights of the experts its tokens
touch.  With T tokens routed top-k over E experts, E_loc of them on the device, the expected
number of distinct local experts touched under uniform routing is E_loc · (1 − (1 − k/E)^T);
weight bytes read = touched × bytes per expert.  FLOPs stay per token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsql.store import connect

CONFIGS = Path(__file__).resolve().parents[1] / "archsql" / "specs" / "configs"
BF16 = 2  # bytes


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def _weights_read(con, model: str, deployment: str, workload: str, like: str) -> float:
    """HBM bytes of the routed expert ops in op_sol minus their activation traffic (the
    polynomial hbm terms evaluated at the workload): the expert weight bytes read."""
    total = con.execute(
        "select sum(bytes) from op_sol where model = ? and deployment = ? and workload = ? and uid like ?"
        " and op in ('expert_linear', 'stacked_expert_linear')",
        [model, deployment, workload, like],
    ).fetchone()[0]
    activations = con.execute(
        """select sum(t.hbm_bytes * term_value(t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg,
                                               w.batch, w.new_tokens, w.context))
           from int_device_op_terms as t
           inner join base_workloads as w on w.phase = t.phase
           where t.model = ? and t.deployment = ? and w.workload = ? and t.uid like ?
             and t.op in ('expert_linear', 'stacked_expert_linear')""",
        [model, deployment, workload, like],
    ).fetchone()[0]
    return total - activations


@pytest.mark.parametrize("workload, tokens", [("decode_b1_c2k", 1), ("decode_b64_c2k", 64)])
def test_deepseek_v3_tp8_ep8_decode_reads_the_experts_its_tokens_touch(models_db, workload, tokens):
    c = _cfg("deepseek-ai__DeepSeek-V3.json")
    experts, k, d, f = c["n_routed_experts"], c["num_experts_per_tok"], c["hidden_size"], c["moe_intermediate_size"]
    moe_layers = c["num_hidden_layers"] - c["first_k_dense_replace"]  # 58
    ep = 8
    local = experts // ep  # 32 experts per GPU per layer
    per_expert = 3 * d * f * BF16  # gate, up, down projections in bf16: 88,080,384 bytes
    # TP8+EP8: attention output is all-reduced, so every GPU routes all batch × 1 tokens
    touched = local * (1 - (1 - k / experts) ** tokens)  # b1: 1.0; b64: 32·(1 − (31/32)^64) = 27.57
    expected = moe_layers * touched * per_expert  # b1: 5.109e9 (was 58·32·per_expert = 163.5e9)
    with connect(models_db) as con:
        got = _weights_read(con, "DeepSeek-V3", "8xH200-tp8-ep8", workload, "decoder/%")
        held = con.execute(
            "select sum(bytes) from int_device_weights where model = 'DeepSeek-V3'"
            " and deployment = '8xH200-tp8-ep8' and uid like 'decoder/moe/mlp.%_proj' and uid not like '%shared%'"
        ).fetchone()[0]
    assert held == moe_layers * local * per_expert  # what the GPU holds is unchanged
    assert got == pytest.approx(expected, rel=1e-9)


def test_flops_stay_per_token(models_db):
    """Expert FLOPs are 2·d·f per projection per (token, expert) pair on the device's share."""
    c = _cfg("deepseek-ai__DeepSeek-V3.json")
    experts, k, d, f = c["n_routed_experts"], c["num_experts_per_tok"], c["hidden_size"], c["moe_intermediate_size"]
    moe_layers = c["num_hidden_layers"] - c["first_k_dense_replace"]
    with connect(models_db) as con:
        flops = con.execute(
            "select sum(flops) from op_sol where model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8'"
            " and workload = 'decode_b64_c2k' and uid like 'decoder/%' and op = 'expert_linear'"
        ).fetchone()[0]
    assert flops == pytest.approx(moe_layers * 64 * k / 8 * 3 * 2 * d * f, rel=1e-12)
    assert experts == 256


def test_qwen3_moe_single_gpu_batch1_reads_top_k_experts(models_db):
    """1 GPU holds all E experts; one token touches exactly k of them: E·(1 − (1 − k/E)) = k."""
    c = _cfg("Qwen__Qwen3-30B-A3B.json")
    experts, k, d, f = c["num_experts"], c["num_experts_per_tok"], c["hidden_size"], c["moe_intermediate_size"]
    expected = c["num_hidden_layers"] * k * 3 * d * f * BF16
    with connect(models_db) as con:
        got = _weights_read(con, "Qwen3-30B-A3B", "1xH200-single", "decode_b1_c2k", "%")
    assert got == pytest.approx(expected, rel=1e-9)
    assert experts == 128


def test_experts_touched_macro_is_the_one_source(models_db):
    """The corpus macro is the store macro at experts/ep local experts, balanced routing."""
    with connect(models_db) as con:
        uniform = con.execute("select experts_touched(64, 8, 256, 32, 'uniform')").fetchone()[0]
        balanced = con.execute("select experts_touched(64, 8, 256, 32, 'balanced')").fetchone()[0]
        skewed = con.execute("select experts_touched(64, 8, 256, 32, 'power_law_1.2')").fetchone()[0]
    assert uniform == pytest.approx(32 * (1 - (1 - 8 / 256) ** 64), rel=1e-12)
    assert balanced == 32  # 64·8/8 = 64 pairs on the rank fill its 32 experts
    assert skewed == 1  # ceil(8 / 8)
