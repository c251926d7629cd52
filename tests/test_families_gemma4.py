"""Gemma-4 26B-A4B (gemma4, text_config) against values derived by hand from its config.json
(archsql/specs/configs/google__gemma-4-26B-A4B.json):

* text_config.layer_types: "sliding_attention" layers (a causal window of sliding_window =
  1024 keys, num_key_value_heads = 8 heads of head_dim = 256) and every sixth layer
  "full_attention" (num_global_key_value_heads = 2 heads of global_head_dim = 512);
* attention_k_eq_v: the full layers have no v_proj — their values are the key projection,
  normed by the weightless v_norm and NOT rotated, while the keys are k_norm-ed and rotated.
  The cache still holds two tensors per head: transformers' Gemma4TextAttention.forward
  passes (key_states, value_states) to past_key_values.update, and vLLM's Gemma4Attention
  loads the k_proj weight into both the K and V slots of its fused qkv_proj and caches K and
  V (its comment: "k_eq_v layers load K weights into both K and V slots").  Sharing one
  cached tensor would need keys and values equal, and they are not (norm weight, RoPE).
* every layer runs a dense GeGLU MLP and a MoE in parallel (enable_moe_block); the router
  reads the layer's residual stream, the experts pre_feedforward_layernorm_2 of it.
Parameters (total and per role) are checked against the meta-device inventory in
tests/test_inventory_params.py; here: the structure, the caches and the active share.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsql.evaluator import evaluate
from archsql.store import connect

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
MODEL = "gemma-4-26B-A4B"


@pytest.fixture(scope="module")
def cfg() -> dict:
    return json.loads((CONFIGS / "google__gemma-4-26B-A4B.json").read_text())["text_config"]


@pytest.fixture(scope="module")
def analysis():
    return evaluate(MODEL)


def test_layer_schedule_follows_layer_types(cfg, analysis):
    """Every sixth layer (5, 11, 17, 23, 29) is full attention, the 25 others sliding."""
    schedule = {r["layer"]: r["template"] for r in analysis.tables["layer_schedule"].to_pylist()}
    full = [i for i, t in enumerate(cfg["layer_types"]) if t == "full_attention"]
    assert full == [5, 11, 17, 23, 29]
    assert schedule == {i: "global" if i in full else "sliding" for i in range(cfg["num_hidden_layers"])}


def test_k_eq_v_layers_have_no_value_projection(cfg, analysis):
    """Full layers: q_proj [16·512, d], k_proj [2·512, d], no v_proj; the value norm reads the
    key projection's heads (before k_norm and RoPE).  Sliding layers: v_proj [8·256, d]."""
    d = cfg["hidden_size"]
    weights = {r["uid"]: r["shape"] for r in analysis.tables["weights"].to_pylist()}
    g, s = "decoder/global/self_attn.", "decoder/sliding/self_attn."
    assert weights[g + "q_proj"] == [cfg["num_attention_heads"] * cfg["global_head_dim"], d]
    assert weights[g + "k_proj"] == [cfg["num_global_key_value_heads"] * cfg["global_head_dim"], d]
    assert g + "v_proj" not in weights
    assert weights[s + "v_proj"] == [cfg["num_key_value_heads"] * cfg["head_dim"], d]
    edges = {(r["src_uid"], r["dst_uid"]) for r in analysis.tables["edges"].to_pylist() if r["phase"] == "prefill"}
    assert (g + "k_heads", g + "v_norm") in edges  # values = the key projection, value-normed
    assert (g + "k_norm", g + "k_rope") in edges  # keys: k_norm, then RoPE
    assert (g + "v_norm", g + "attn") in edges


def test_router_reads_the_residual_and_experts_the_second_pre_norm(analysis):
    """Gemma4TextDecoderLayer.forward: ``self.router(hidden_states_flat)`` on the residual,
    ``self.experts(self.pre_feedforward_layernorm_2(hidden_states_flat), …)``."""
    edges = {(r["src_uid"], r["dst_uid"]) for r in analysis.tables["edges"].to_pylist() if r["phase"] == "prefill"}
    t = "decoder/sliding/"
    assert (t + "attn_residual", t + "moe.router_norm") in edges
    assert (t + "pre_feedforward_layernorm_2", t + "moe.dispatch") in edges
    assert (t + "post_feedforward_layernorm_1", t + "ffn_sum") in edges
    assert (t + "post_feedforward_layernorm_2", t + "ffn_sum") in edges
    assert (t + "ffn_residual", t + "layer_scalar") in edges


# (elements per token per layer, window) by hand from the config:
#   sliding layer: K and V, num_key_value_heads × head_dim each = 2 × 8 × 256 = 4096, window 1024
#   full layer (k = v): K and V, num_global_key_value_heads × global_head_dim = 2 × 2 × 512 = 2048
def _per_layer(cfg: dict) -> dict[str, tuple[int, int | None]]:
    return {
        "sliding": (2 * cfg["num_key_value_heads"] * cfg["head_dim"], cfg["sliding_window"]),
        "global": (2 * cfg["num_global_key_value_heads"] * cfg["global_head_dim"], None),
    }


def test_kv_per_token_per_layer_from_config(cfg, catalog_db):
    per_layer = _per_layer(cfg)
    assert per_layer == {"sliding": (4096, 1024), "global": (2048, None)}
    con = connect(catalog_db)
    rows = con.execute(
        "select template, kind, growth, layers, elements_per_token, bytes_per_token from kv_per_token_by_kind "
        "where model = ? and dtype = 'bf16' order by template, kind",
        [MODEL],
    ).fetchall()
    # key and value: half of each layer's elements; bf16 = 2 bytes
    assert rows == [
        ("global", "key", "window", 5, 5 * 1024, 5 * 1024 * 2),  # window 0 on full layers: every position
        ("global", "value", "window", 5, 5 * 1024, 5 * 1024 * 2),
        ("sliding", "key", "window", 25, 25 * 2048, 25 * 2048 * 2),
        ("sliding", "value", "window", 25, 25 * 2048, 25 * 2048 * 2),
    ]
    (total,) = con.execute(
        "select bytes_per_token from kv_per_token where model = ? and dtype = 'bf16'", [MODEL]
    ).fetchone()
    assert total == (25 * 4096 + 5 * 2048) * 2 == 225_280


@pytest.mark.parametrize("context", [512, 1024, 4096, 32768])
def test_sliding_layers_stop_growing_at_the_window(cfg, catalog_db, context):
    """One request at context c: 25 sliding layers × 4096 × min(c, 1024) + 5 full layers ×
    2048 × c elements, 2 bytes each.  Past c = 1024 only the full layers grow."""
    con = connect(catalog_db)
    got = con.execute(
        """
        select sum(t.coef * term_value(t.e_B, t.e_s, t.e_c, t.factor, t.factor_arg, 1, 1, ?))
        from int_model_terms t where t.model = ? and t.phase = 'decode' and t.quantity = 'cache_elements'
        """,
        [context, MODEL],
    ).fetchone()[0]
    (sliding, window), (full, _) = _per_layer(cfg).values()
    layers = cfg["layer_types"]
    n_sliding, n_full = layers.count("sliding_attention"), layers.count("full_attention")
    assert (n_sliding, n_full) == (25, 5)
    assert got == n_sliding * sliding * min(context, window) + n_full * full * context


def test_active_params_use_top_k_of_the_experts(cfg, catalog_db):
    """Per layer the experts hold num_experts × (2·moe_intermediate × d + d × moe_intermediate)
    = 128 × 3 × 704 × 2816; a token uses top_k_experts = 8 of them, so the active parameters
    are the total less 30 layers × 120 unused experts × 3 × 704 × 2816."""
    d, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
    unused = cfg["num_hidden_layers"] * (cfg["num_experts"] - cfg["top_k_experts"]) * 3 * inter * d
    con = connect(catalog_db)
    params, active = con.execute("select params, active_params from model_summary where model = ?", [MODEL]).fetchone()
    assert params == 25_233_141_790  # the language-model tensors of the inventory (vision tower excluded)
    assert active == params - unused == 3_822_530_590
