"""Per-device memory: weights as stored (scales included) through the layouts, and the
activation peak of a step — against hand derivations from the configs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.store import connect, insert_deployments

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
# archsql/gpus/gpus.csv: H200 SXM exposes 143771 MiB (nvidia-smi, S28; marketed 141 GB); the default
# deployments are served by vLLM, gpu_memory_utilization 0.9 (issue 12 item 9 moved this from 0.9 × 141e9)
H200_USABLE = 0.9 * 143771 * 2**20


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def _one(con, sql, *args):
    return con.execute(sql, list(args)).fetchone()


def test_deepseek_v3_fp8_weights_per_device_count_block_scales(models_db):
    """DeepSeek-V3 in FP8 (float8 e4m3, one F32 inverse scale per 128×128 block, as the
    checkpoint's quantization_config says) on 8×H200 with attention TP8 + EP8.

    q_b_proj [n_heads·(qk_nope + qk_rope), q_lora_rank] is split by heads: a device holds
    128 / 8 = 16 heads = 3072 rows, i.e. 3072 × 1536 FP8 bytes and a ceil(3072/128) ×
    ceil(1536/128) = 24 × 12 grid of F32 scales, in each of the 61 layers.  A routed expert's
    gate_proj [moe_intermediate, hidden] keeps its shape; a device holds 256 / 8 = 32 experts
    of each of the 58 MoE layers, each with a 16 × 56 scale grid."""
    cfg = _cfg("deepseek-ai__DeepSeek-V3.json")
    block_rows, block_cols = cfg["quantization_config"]["weight_block_size"]
    heads = cfg["num_attention_heads"] // 8
    rows = heads * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])  # 3072
    cols = cfg["q_lora_rank"]  # 1536
    q_b_data = rows * cols * 1
    q_b_scales = math.ceil(rows / block_rows) * math.ceil(cols / block_cols) * 4
    assert (q_b_data, q_b_scales) == (4_718_592, 1_152)
    moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]  # 58
    experts = cfg["n_routed_experts"] // 8  # 32 per device
    inter, hidden = cfg["moe_intermediate_size"], cfg["hidden_size"]
    gate_data = inter * hidden
    gate_scales = math.ceil(inter / block_rows) * math.ceil(hidden / block_cols) * 4  # 16 × 56 × 4

    con = connect(models_db)
    q = "select part, sum(total_bytes) from int_device_storage where model = 'DeepSeek-V3' and deployment = ? and uid like ? group by part"
    got = dict(con.execute(q, ["8xH200-tp8-ep8-wfp8", "decoder/%/self_attn.q_b_proj"]).fetchall())
    assert got == {
        "data": cfg["num_hidden_layers"] * q_b_data,
        "weight_scale_inv": cfg["num_hidden_layers"] * q_b_scales,
    }
    got = dict(con.execute(q, ["8xH200-tp8-ep8-wfp8", "decoder/moe/mlp.gate_proj"]).fetchall())
    assert got == {
        "data": moe_layers * experts * gate_data,
        "weight_scale_inv": moe_layers * experts * gate_scales,
    }


def test_deepseek_v3_fp8_device_weights_are_the_stored_totals_through_the_layout(models_db):
    """The totals relation: under attention DP8 + EP8 every tensor is replicated except the
    routed experts, which EP divides by 8 — so one device holds all stored bytes of the base
    model (data and scales, as weight_storage lists them for the FP8 profile) minus 7/8 of
    the routed experts'.  Under TP8 + EP8 the same relation holds tensor by tensor for the
    data parts (÷ the layout's split), and the scale bytes are part of the total: the device
    holds more than its FP8 elements alone."""
    con = connect(models_db)
    stored = """
        with base as (select distinct model, uid, in_base_model from base_nodes),
        experts as (select distinct model, uid from base_layouts where tensor = 'copies')
        select sum(w.total_bytes) filter (where e.uid is null), sum(w.total_bytes) filter (where e.uid is not null)
        from weight_storage as w
        join base as b on b.model = w.model and b.uid = w.uid
        left join experts as e on e.model = w.model and e.uid = w.uid
        where w.model = 'DeepSeek-V3' and w.profile = 'fp8' and b.in_base_model
    """
    replicated, routed = _one(con, stored)
    assert routed > 0.9 * (replicated + routed)  # the experts are most of the model
    (dp_ep,) = _one(
        con,
        "select weight_bytes from device_memory where model = 'DeepSeek-V3' and deployment = '8xH200-dp8-ep8-wfp8' "
        "and workload = 'decode_b1_c2k'",
    )
    assert dp_ep == pytest.approx(replicated + routed / 8, rel=1e-12)
    (tp_ep,) = _one(
        con,
        "select weight_bytes from device_memory where model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8-wfp8' "
        "and workload = 'decode_b1_c2k'",
    )
    data, scales = _one(
        con,
        "with base as (select distinct model, uid, in_base_model from base_nodes) "
        "select sum(s.total_bytes) filter (where s.part = 'data'), "
        "sum(s.total_bytes) filter (where s.part = 'weight_scale_inv') "
        "from int_device_storage as s join base as b on b.model = s.model and b.uid = s.uid "
        "where s.model = 'DeepSeek-V3' and s.deployment = '8xH200-tp8-ep8-wfp8' and b.in_base_model",
    )
    assert scales > 0 and tp_ep == pytest.approx(data + scales, rel=1e-12)
    # the FP8 elements alone: the layout's per-device elements of every tensor, at 1 byte for
    # the FP8 linears (the data parts) — the scales are what the old elements × dtype missed
    assert tp_ep - data == scales


def test_a_bf16_model_weighs_two_bytes_per_parameter_on_every_layout(models_db):
    """Meta-Llama-3.1-8B stores every tensor in BF16, so the storage-based weight bytes are
    what elements × 2 gave: 2 × 8,030,261,248 on one GPU (the inventory's parameter count),
    and 2 × the layout's per-device elements, tensor by tensor, on TP8."""
    con = connect(models_db)
    (single,) = _one(
        con,
        "select weight_bytes from device_memory where model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single' "
        "and workload = 'decode_b1_c2k'",
    )
    assert single == 2 * 8_030_261_248
    mismatched = con.execute(
        "select uid, tensor, elements, bytes from int_device_weights "
        "where model = 'Meta-Llama-3.1-8B' and deployment in ('1xH200-single', '8xH200-tp8') and bytes <> 2 * elements"
    ).fetchall()
    assert mismatched == []


def test_llama_prefill_activation_peak_by_hand(models_db):
    """Meta-Llama-3.1-8B, prefill of 2048 tokens, batch 1, BF16 activations.

    One GPU: the peak is inside the MLP — while act = silu(gate_proj) (or gated = act · up)
    runs, four [s, ·] tensors are held: the attention residual (read again by the MLP's
    residual add, hidden) and gate_proj / up_proj / act outputs (three × intermediate).
    (hidden + 3 · intermediate) · 2048 · 2 B = 192,937,984 B.  The K/V cache of the prompt
    is larger per request (2048 · 32 layers · 2 · 8 heads · 128 · 2 B), so the batch is KV-limited.

    TP8: the MLP is split by 8 but the residual stream is whole on every rank; the peak is a
    residual add — its two inputs (the residual and o_proj's or down_proj's pending sum, full
    size on every rank) and its output: 3 · hidden · 2048 · 2 B = 50,331,648 B (both adds
    hold as much), more than the rank's eighth of the cache (33,554,432 B), so the batch is
    activation-limited."""
    cfg = _cfg("meta-llama__Meta-Llama-3.1-8B.json")
    s, hidden, inter = 2048, cfg["hidden_size"], cfg["intermediate_size"]
    head_dim = hidden // cfg["num_attention_heads"]
    kv = s * cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * head_dim * 2
    weights = 2 * 8_030_261_248
    one_gpu = (hidden + 3 * inter) * s * 2
    assert one_gpu == 192_937_984
    con = connect(models_db)
    q = (
        "select activation_bytes, activation_peak_op, kv_bytes, max_batch, limited_by from device_memory "
        "where model = 'Meta-Llama-3.1-8B' and deployment = ? and workload = 'prefill_2k'"
    )
    act, op, kv_got, max_batch, limited_by = _one(con, q, "1xH200-single")
    assert act == one_gpu and op in ("decoder/dense/mlp.act", "decoder/dense/mlp.gated")
    assert kv_got == kv and limited_by == "kv"
    assert max_batch == math.floor((H200_USABLE - weights) / (kv + one_gpu))
    act8, op8, kv8, _, limited8 = _one(con, q, "8xH200-tp8")
    assert act8 == 3 * hidden * s * 2 and op8 in ("decoder/dense/attn_residual", "decoder/dense/ffn_residual")
    assert kv8 == kv / 8 and limited8 == "activations"


def test_activations_grow_with_the_prompt_and_split_with_data_parallelism(models_db):
    """The same liveness at 16× the prompt holds 16× the bytes (every live tensor is per
    token in prefill); DP8 gives each rank its requests' activations (÷ 8 of a 64-request
    decode batch's), while TP8 leaves the replicated residual stream whole."""
    con = connect(models_db)
    act = dict(
        ((d, w), b)
        for d, w, b in con.execute(
            "select deployment, workload, activation_bytes from device_memory where model = 'Qwen3-30B-A3B'"
        ).fetchall()
    )
    assert act[("1xH200-single", "prefill_32k")] == pytest.approx(16 * act[("1xH200-single", "prefill_2k")])
    assert act[("8xH200-dp8-ep8", "decode_b64_c8k")] < act[("1xH200-single", "decode_b64_c8k")] / 4


def test_expert_parallelism_divides_stacked_mxfp4_experts_with_their_scales(models_db, tmp_path):
    """gpt-oss-20b as shipped (weight_profile native: routed experts in MXFP4, stacked as one
    tensor per layer) on DP8 + EP8: each device holds 32 / 8 = 4 of every layer's experts —
    the stacked experts axis is divided, blocks and E8M0 scales alike.  gate_up_proj of one
    layer stores [experts, 2·intermediate, hidden / 32, 16] bytes of blocks and
    [experts, 2·intermediate, hidden / 32] scale bytes."""
    cfg = _cfg("openai__gpt-oss-20b.json")
    experts, hidden, inter, layers = (
        cfg["num_local_experts"],
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_hidden_layers"],
    )
    blocks = (experts // 8) * 2 * inter * (hidden // 32) * 16  # two e2m1 values per byte
    scales = (experts // 8) * 2 * inter * (hidden // 32)
    db = tmp_path / "store.duckdb"
    shutil.copy(models_db, db)
    con = duckdb.connect(str(db))
    insert_deployments(
        con, [{"deployment": "8xH200-dp8-ep8-native", "weight_profile": "native"}], like="8xH200-dp8-ep8"
    )
    got = dict(
        con.execute(
            "select part, sum(total_bytes) from int_device_storage where model = 'gpt-oss-20b' "
            "and deployment = '8xH200-dp8-ep8-native' and uid like 'decoder/%/mlp.gate_up_proj' and tensor = 'weight' "
            "group by part"
        ).fetchall()
    )
    assert got == {"data": layers * blocks, "scales": layers * scales}
