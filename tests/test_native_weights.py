"""The native weight profile: weights as the checkpoint ships them, resolved per model from its
own config (quantization_config) — FP8 blocks for DeepSeek-V3, MXFP4 experts for gpt-oss,
BF16 for Llama — on the default `-wnative` deployments and through `archsql sweep --weights
native`.  Expected bytes are derived from config.json by the formulas stated in each test,
and DeepSeek-V3's are checked against the meta-device checkpoint inventory as well."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.store import connect, keep_deployments
from tests.conftest import load_inventory

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
MODELS = ("DeepSeek-V3", "gpt-oss-120b", "Meta-Llama-3.1-8B")  # one store with tests/test_mtp_deployment.py


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(scope="module")
def db(store_of) -> Path:
    return store_of(*MODELS)


@pytest.fixture(scope="module")
def con(db):
    c = connect(db)
    yield c
    c.close()


def _weights(con, model: str, deployment: str) -> float:
    (bytes_,) = con.execute(
        "select weight_bytes from device_memory where model = ? and deployment = ? and workload = 'decode_b1_c2k'",
        [model, deployment],
    ).fetchone()
    return bytes_


def _deepseek_v3_native_bytes(cfg: dict) -> int:
    """DeepSeek-V3 as shipped (no MTP layer: a deployment that does not draft leaves it out).

    config quantization_config {quant_method: fp8, weight_block_size: [128, 128]}: every
    linear of the decoder layers — MLA projections, dense MLP, routed and shared experts —
    is float8 e4m3 (1 byte per element) with one F32 weight_scale_inv per 128×128 block
    (ceil at the edges).  Kept in BF16 (2 bytes): embed_tokens, lm_head, every RMSNorm, the
    router weight mlp.gate.weight; the router's e_score_correction_bias is F32 (DeepSeek's
    inference Gate keeps the bias in float32)."""
    d, (br, bc) = cfg["hidden_size"], cfg["quantization_config"]["weight_block_size"]
    heads, nope, rope, v = (
        cfg["num_attention_heads"],
        cfg["qk_nope_head_dim"],
        cfg["qk_rope_head_dim"],
        cfg["v_head_dim"],
    )
    q_lora, kv_lora, vocab = cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["vocab_size"]
    experts, inter, shared = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["n_shared_experts"]
    dense, layers = cfg["first_k_dense_replace"], cfg["num_hidden_layers"]

    def fp8(out: int, inp: int) -> int:
        return out * inp + 4 * math.ceil(out / br) * math.ceil(inp / bc)

    def mlp(f: int) -> int:  # gate_proj, up_proj [f, d]; down_proj [d, f]
        return 2 * fp8(f, d) + fp8(d, f)

    attention = (
        fp8(q_lora, d)
        + fp8(heads * (nope + rope), q_lora)
        + fp8(kv_lora + rope, d)
        + fp8(heads * (nope + v), kv_lora)
        + fp8(d, heads * v)
    )
    norms = 2 * (2 * d + q_lora + kv_lora)
    moe = experts * mlp(inter) + mlp(inter * shared) + 2 * experts * d + 4 * experts
    return (
        2 * 2 * vocab * d  # embed_tokens, lm_head
        + 2 * d  # model.norm
        + layers * (attention + norms)
        + dense * mlp(cfg["intermediate_size"])
        + (layers - dense) * moe
    )


def test_deepseek_v3_native_is_fp8_blocks_by_config(con):
    cfg = _cfg("deepseek-ai__DeepSeek-V3.json")
    expected = _deepseek_v3_native_bytes(cfg)
    assert _weights(con, "DeepSeek-V3", "1xH200-wnative") == expected
    # the fp8 precision profile stores DeepSeek-V3 exactly as it ships
    assert _weights(con, "DeepSeek-V3", "8xH200-tp8-ep8-wnative") == _weights(con, "DeepSeek-V3", "8xH200-tp8-ep8-wfp8")


def test_deepseek_v3_native_matches_the_checkpoint_inventory():
    """Independent ground truth: the tensors transformers' FineGrainedFP8 quantizer lays out for
    DeepSeek-V3's checkpoint (meta-device inventory, MTP layer 61 ignored on load as by a
    deployment that does not draft): float8_e4m3fn weights, float32 weight_scale_inv, bfloat16
    rest, each numel × its width.  Two tensors of it carry the loader's dtype, not the disk's:
    transformers keeps mlp.gate.weight and e_score_correction_bias in fp32 at load
    (keep_in_fp32_at_load); the checkpoint stores the router weight in BF16 (2 bytes) and the
    bias in F32."""
    inv = load_inventory("deepseek-ai__DeepSeek-V3.json")
    width = {"float8_e4m3fn": 1, "float32": 4, "bfloat16": 2}
    total = 0
    for t in inv["checkpoint_tensors"]:
        n = math.prod(t["shape"])
        total += n * (2 if t["name"].endswith("mlp.gate.weight") else width[t["dtype"]])
    assert total == _deepseek_v3_native_bytes(_cfg("deepseek-ai__DeepSeek-V3.json"))


def _gpt_oss_native_bytes(cfg: dict) -> dict[str, int]:
    """gpt-oss-120b as shipped: config quantization_config {quant_method: mxfp4,
    modules_to_not_convert: [self_attn, mlp.router, embed_tokens, lm_head]} — the routed
    experts' gate_up_proj [E, 2·f, d] and down_proj [E, d, f] in MXFP4: 4 bits per element
    (two e2m1 values per byte) plus one E8M0 scale byte per block of 32 along the input;
    everything else BF16: embed_tokens, lm_head (untied), q/k/v/o with biases, attention
    sinks [heads], router weight and bias, the experts' biases, norms."""
    d, f, e, layers, vocab = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_local_experts"],
        cfg["num_hidden_layers"],
        cfg["vocab_size"],
    )
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    expert_elements = e * (2 * f * d + d * f)
    mxfp4 = layers * (expert_elements // 2 + expert_elements // 32)
    attention = (heads * hd) * d + (heads * hd) + 2 * ((kv * hd) * d + kv * hd) + d * (heads * hd) + d + heads
    per_layer = attention + (e * d + e) + e * (2 * f + d) + 2 * d  # router, expert biases, norms
    bf16 = 2 * (2 * vocab * d + d + layers * per_layer)
    return {"mxfp4": mxfp4, "bf16": bf16}


def test_gpt_oss_native_is_mxfp4_experts_and_bf16_rest(con):
    cfg = _cfg("openai__gpt-oss-120b.json")
    parts = _gpt_oss_native_bytes(cfg)
    assert _weights(con, "gpt-oss-120b", "1xH200-wnative") == parts["mxfp4"] + parts["bf16"]
    # the MXFP4 bytes alone: the inventory's uint8 _blocks / _scales tensors
    inv = load_inventory("openai__gpt-oss-120b.json")
    assert sum(math.prod(t["shape"]) for t in inv["checkpoint_tensors"] if t["dtype"] == "uint8") == parts["mxfp4"]


def test_llama_native_is_bf16(con):
    """Meta-Llama-3.1-8B ships BF16 (config torch_dtype bfloat16, no quantization_config):
    native = 2 bytes × parameters, the bf16 profile's bytes."""
    (params,) = con.execute("select params from model_summary where model = 'Meta-Llama-3.1-8B'").fetchone()
    assert _weights(con, "Meta-Llama-3.1-8B", "1xH200-wnative") == 2 * params
    assert _weights(con, "Meta-Llama-3.1-8B", "1xH200-wnative") == _weights(con, "Meta-Llama-3.1-8B", "1xH200-single")


def test_native_matmuls_run_in_their_stored_element(con):
    """A native deployment names no matmul dtype: each quantized weight's GEMM runs in the
    dtype of its stored elements — FP8 blocks at fp8, MXFP4 experts at fp4 (8 and 4 bits per
    element); unquantized weights at the act dtype."""
    q = (
        "select math_dtype from op_sol where model = ? and deployment = '8xB200-tp8-ep8-wnative' "
        "and workload = 'decode_b64_c8k' and uid like ? group by math_dtype"
    )
    assert con.execute(q, ["DeepSeek-V3", "decoder/%/self_attn.q_b_proj"]).fetchall() == [("fp8",)]
    assert con.execute(q, ["gpt-oss-120b", "decoder/%/mlp.gate_up_proj"]).fetchall() == [("fp4",)]
    assert con.execute(q, ["gpt-oss-120b", "decoder/%/self_attn.q_proj"]).fetchall() == [("bf16",)]
    assert con.execute(q, ["Meta-Llama-3.1-8B", "decoder/%/self_attn.q_proj"]).fetchall() == [("bf16",)]


def test_sweep_weights_native(db, tmp_path):
    """`archsql sweep MODEL --weights native` stores every model as it ships: on one GPU the
    weights are the hand-derived native bytes above."""
    store = tmp_path / "store.duckdb"
    shutil.copy(db, store)
    with duckdb.connect(str(store)) as c:
        keep_deployments(c, [])  # the sweep's own grid only
    expected = {
        "DeepSeek-V3": _deepseek_v3_native_bytes(_cfg("deepseek-ai__DeepSeek-V3.json")),
        "gpt-oss-120b": sum(_gpt_oss_native_bytes(_cfg("openai__gpt-oss-120b.json")).values()),
    }
    for model, bytes_ in expected.items():
        args = ["sweep", model, "--count", "1", "--weights", "native", "--batch", "1", "--context", "8k"]
        result = CliRunner().invoke(cli, ["--db", str(store), *args, "--format", "csv"])
        assert result.exit_code == 0, result.output
        (row,) = list(csv.DictReader(io.StringIO(result.stdout)))  # (stderr names the dropped layouts)
        assert row["weight_profile"] == "native" and row["weight_dtype"] == ""
        assert float(row["weight_bytes"]) == bytes_
