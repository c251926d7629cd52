"""Kimi delta attention (KDA), NoPE MLA, latent MoE, attention residuals and the MoonViT
vision tower: Kimi-Linear (transformers' class-default config, a test fixture) and Kimi-K3
(catalog).

* Kimi-Linear defaults: tests/fixtures/specs/Kimi-Linear-defaults.yaml built from
  tests/fixtures/configs/kimi_linear__KimiLinearConfig__defaults.json must equal
  transformers' meta-device inventory of the same config (defaults__kimi_linear.json.gz)
  tensor by tensor: total, per role and checkpoint names (difference 0).
* Kimi-K3 has no inventory: its parameter count is derived below from config.json, the
  arithmetic written out; the tensor shapes it uses are those SGLang's KimiK3 model builds
  (python/sglang/srt/models/kimi_k3.py) — q/k/v/g_proj [h·d, d], b_proj [h, d], f_a/f_b,
  q/k/v_conv1d [h·d, 1, 4], A_log [d_head], dt_bias [h·d], o_norm [d_head]; the gated MLA's
  g_proj [h·d_v, d]; the latent MoE's routed_expert_down/up_proj and routed_expert_norm;
  the attention-residual norms and [1, d] projections of every layer and of the output.
* Caches: KDA layers keep a fixed state per request (three conv states and a matrix state),
  MLA layers kv_lora_rank + qk_rope_head_dim elements per token.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
from pathlib import Path

import pytest

from archsql.errors import SpecError
from archsql.evaluator import evaluate
from archsql.specs import CONFIGS_DIR, MODELS_DIR, load_library
from archsql.store import connect
from tests.conftest import FIXTURES
from tests.test_inventory_params import inventory_role
from tests.test_spec_errors import assert_all_located, edit, line_of, located

BF16 = 2
K3 = json.loads((CONFIGS_DIR / "moonshotai__Kimi-K3.json").read_text())["text_config"]
DEFAULTS_CONFIG = FIXTURES / "configs" / "kimi_linear__KimiLinearConfig__defaults.json"
DEFAULTS_SPEC = FIXTURES / "specs" / "Kimi-Linear-defaults.yaml"


def _rows(analysis, table: str, **where) -> list[dict]:
    return [r for r in analysis.tables[table].to_pylist() if all(r.get(k) == v for k, v in where.items())]


def _params_by_role(analysis) -> dict[str, int]:
    count = {r["uid"]: r["count"] for r in analysis.tables["instances"].to_pylist()}
    role = {r["uid"]: r["role"] for r in analysis.tables["nodes"].to_pylist()}
    out: dict[str, int] = collections.Counter()
    for w in analysis.tables["weights"].to_pylist():
        out[role[w["uid"]]] += math.prod(w["shape"]) * count[w["uid"]]
    return dict(out)


def _checkpoint_names(analysis) -> dict[str, list[int]]:
    """Every weights row expanded over its layers ({layer}) and experts ({expert})."""
    count = {r["uid"]: r["count"] for r in analysis.tables["instances"].to_pylist()}
    where = {r["uid"]: (r["stack"], r["template"]) for r in analysis.tables["nodes"].to_pylist()}
    schedule = collections.defaultdict(list)
    for r in analysis.tables["layer_schedule"].to_pylist():
        schedule[(r["stack"], r["template"])].append(r["layer"])
    out: dict[str, list[int]] = {}
    for w in analysis.tables["weights"].to_pylist():
        layers = schedule[where[w["uid"]]] if "{layer}" in w["name"] else [None]
        experts = range(count[w["uid"]] // len(layers)) if "{expert}" in w["name"] else [None]
        for layer in layers:
            for expert in experts:
                out[w["name"].format(layer=layer, expert=expert)] = list(w["shape"])
    return out


@pytest.fixture(scope="module")
def kimi_linear(tmp_path_factory):
    """The fixture spec with its config path made absolute (evaluated from a temp dir)."""
    root = tmp_path_factory.mktemp("kimi_linear")
    text = DEFAULTS_SPEC.read_text().replace(f"config: {DEFAULTS_CONFIG.name}", f"config: {DEFAULTS_CONFIG}")
    (root / DEFAULTS_SPEC.name).write_text(text)
    return evaluate(root / DEFAULTS_SPEC.name)


@pytest.fixture(scope="module")
def k3():
    return evaluate("Kimi-K3")


def _inventory() -> dict:
    with gzip.open(FIXTURES / "meta_inventories" / "defaults__kimi_linear.json.gz") as f:
        return json.load(f)


def _defaults_role(name: str, kda_layers: set[str]) -> str:
    """Role of an inventory tensor from its module: a layer's self_attn module is a
    KimiLinearDeltaAttention (linear attention) when it holds A_log, else MLA; the dense
    layer's MLP sits directly under block_sparse_moe (gate/up/down_proj, no experts)."""
    layer = name.split(".self_attn.")[0]
    if ".self_attn." in name and layer in kda_layers:
        return "linear_attention"
    if ".block_sparse_moe." in name and name.split(".block_sparse_moe.")[1].split(".")[0].endswith("_proj"):
        return "ffn"
    return inventory_role(name)


# --------------------------------------------------------------------------- Kimi-Linear defaults


def test_kimi_linear_defaults_equal_the_inventory(kimi_linear):
    """Total and per-role parameters equal transformers' KimiLinearForCausalLM built from the
    class defaults (difference 0); the per-role split reads each tensor's module."""
    inv = _inventory()
    tensors = inv["checkpoint_tensors"]
    assert sum(math.prod(t["shape"]) for t in tensors) == inv["num_checkpoint_elements"]
    kda_layers = {t["name"].removesuffix(".self_attn.A_log") for t in tensors if t["name"].endswith(".self_attn.A_log")}
    expected: dict[str, int] = collections.Counter()
    for t in tensors:
        expected[_defaults_role(t["name"], kda_layers)] += math.prod(t["shape"])
    got = _params_by_role(kimi_linear)
    assert sum(got.values()) - inv["num_checkpoint_elements"] == 0
    assert got == dict(expected)


def test_kimi_linear_defaults_weight_names_are_the_checkpoint_names(kimi_linear):
    """KDA: q/k/v_conv1d, A_log [1, 1, h, 1], dt_bias [h·d], f_a/f_b, g_a/g_b, b_proj; the
    MoE's experts stored as block_sparse_moe.experts.N.w1/w2/w3 (a fill rename of whole
    node paths); the dense MLP under block_sparse_moe."""
    expected = {t["name"]: list(t["shape"]) for t in _inventory()["checkpoint_tensors"]}
    assert _checkpoint_names(kimi_linear) == expected


def test_kimi_linear_defaults_schedule_covers_layer_types(kimi_linear):
    cfg = json.loads(DEFAULTS_CONFIG.read_text())
    kinds = {
        "linear_attention,dense": "kda_dense",
        "linear_attention,sparse": "kda_moe",
        "full_attention,sparse": "mla_moe",
    }
    schedule = [r["template"] for r in sorted(_rows(kimi_linear, "layer_schedule"), key=lambda r: r["layer"])]
    assert schedule == [kinds[f"{a},{m}"] for a, m in zip(cfg["layer_types"], cfg["mlp_layer_types"], strict=True)]


def test_kda_state_is_fixed_and_nope_mla_grows_per_token(kimi_linear):
    """Kimi-Linear defaults: a KDA layer keeps q/k/v conv states of 32·128 channels × (4 − 1)
    inputs each (3 · 4096 · 3 = 36,864) and a 32 × 128 × 128 matrix state (524,288) per
    request; an MLA layer keeps kv_lora_rank 512 + qk_rope_head_dim 64 elements per token
    (no rotary: the shared key part is cached as it is projected)."""
    cfg = json.loads(DEFAULTS_CONFIG.read_text())
    h, d, k = cfg["linear_num_heads"], cfg["linear_head_dim"], cfg["linear_conv_kernel_dim"]
    by_kind = collections.defaultdict(set)
    for r in _rows(kimi_linear, "caches"):
        by_kind[(r["uid"].split("/")[1], r["kind"], r["growth"])].add(r["elements"])
    assert by_kind == {
        ("kda_dense", "conv_state", "state"): {h * d * (k - 1)},
        ("kda_dense", "recurrent_state", "state"): {h * d * d},
        ("kda_moe", "conv_state", "state"): {h * d * (k - 1)},
        ("kda_moe", "recurrent_state", "state"): {h * d * d},
        ("mla_moe", "latent", "per_token"): {cfg["kv_lora_rank"]},
        ("mla_moe", "shared_key", "per_token"): {cfg["qk_rope_head_dim"]},
    }
    conv_states = [r for r in _rows(kimi_linear, "caches", kind="conv_state") if "/kda_moe/" in r["uid"]]
    assert len(conv_states) == 3  # q, k and v each keep their own conv inputs
    no_rope = [r["uid"] for r in _rows(kimi_linear, "nodes") if r["op"] == "rope" and "/mla_moe/" in r["uid"]]
    assert no_rope == []


# --------------------------------------------------------------------------- Kimi-K3


def k3_params_by_role() -> dict[str, int]:
    """Kimi-K3 parameters from config.json (text_config), every tensor counted once.

    d = hidden_size 7168, V = vocab_size 163840, L = 93 layers: KDA layers = the 69 of
    linear_attn_config.kda_layers, MLA layers = the 24 of full_attn_layers; h = 96 heads,
    d_h = head_dim 128 (= v_head_dim), P = h·d_h = 12288, conv kernel 4.
      KDA layer: q/k/v_proj 3·P·d, q/k/v_conv1d 3·P·4, f_a_proj d·d_h, f_b_proj d_h·P,
        b_proj h·d, g_proj P·d, o_proj d·P (linear_attention) + A_log d_h, dt_bias P,
        o_norm d_h.
      MLA layer: q_a_proj d·1536 + q_a_layernorm 1536 + q_b_proj 1536·h·(128 + 64),
        kv_a_proj_with_mqa d·(512 + 64) + kv_a_layernorm 512 + kv_b_proj 512·h·(128 + 128),
        g_proj d·h·128, o_proj h·128·d (attention).
      Every layer: input/post_attention layernorms and self_attention/mlp res norms 4·d
        (norm); self_attention_res_proj and mlp_res_proj [1, d] each (residual).
      Dense layer (first_k_dense_replace = 1): gate/up/down 3·d·33792 (ffn).
      MoE layer (the other 92): gate E·d + e_score_correction_bias E (E = 896), experts
        E·3·3584·3072 (routed_expert_hidden_size 3584, moe_intermediate_size 3072),
        routed_expert_down_proj + routed_expert_up_proj 2·d·3584, routed_expert_norm 3584,
        shared experts 3·d·(3072·2) (ffn_moe).
      Model: embed_tokens V·d, lm_head V·d (untied), norm + output_attn_res_norm 2·d,
        output_attn_res_proj d.
      Vision (vision_config; SGLang kimi_k3_vl.py): patch_embed.proj Conv2d 1024·3·14·14
        (no bias; 3 channels = MoonVision3dPatchEmbed in_dim), pos_emb grid
        init_pos_emb_height · init_pos_emb_width · 1024; per MoonViT layer (27) norm0 +
        norm1 2·1024, wqkv 1024·3·1536 (qkv_hidden_size), wo 1536·1024, mlp.fc0/fc1
        2·1024·4096 (no biases); final_layernorm 1024; mm_projector proj.0 (4·1024)²,
        proj.2 4·1024·d, post_norm d."""
    c, la = K3, K3["linear_attn_config"]
    d, vocab, layers = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
    n_kda, n_mla = len(la["kda_layers"]), len(la["full_attn_layers"])
    assert n_kda + n_mla == layers
    h, dh, dv, conv = la["num_heads"], la["head_dim"], c["v_head_dim"], la["short_conv_kernel_size"]
    p = h * dh
    kda = 3 * p * d + 3 * p * conv + d * dh + dh * p + h * d + p * d + d * p + dh + p + dv
    hm, ql, kvl, nope, rope = (
        c[k] for k in ("num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")
    )
    mla = (
        d * ql
        + ql
        + ql * hm * (nope + rope)
        + d * (kvl + rope)
        + kvl
        + kvl * hm * (nope + dv)
        + d * hm * dv
        + hm * dv * d
    )
    e, lat, fe = c["num_experts"], c["routed_expert_hidden_size"], c["moe_intermediate_size"]
    moe = e * d + e + e * 3 * lat * fe + 2 * d * lat + lat + 3 * d * fe * c["num_shared_experts"]
    dense = c["first_k_dense_replace"]
    v = json.loads((CONFIGS_DIR / "moonshotai__Kimi-K3.json").read_text())["vision_config"]
    vh, vq, vf = v["vt_hidden_size"], v["qkv_hidden_size"], v["vt_intermediate_size"]
    merged = vh * v["merge_kernel_size"][0] * v["merge_kernel_size"][1]
    vit_layer = 2 * vh + vh * 3 * vq + vq * vh + 2 * vh * vf
    vision = vh * 3 * v["patch_size"] ** 2 + v["init_pos_emb_height"] * v["init_pos_emb_width"] * vh
    vision += v["vt_num_hidden_layers"] * vit_layer + vh + merged * merged + merged * d + d
    return {
        "vision": vision,
        "embedding": vocab * d,
        "lm_head": vocab * d,
        "norm": layers * 4 * d + 2 * d,
        "residual": layers * 2 * d + d,
        "linear_attention": n_kda * kda,
        "attention": n_mla * mla,
        "ffn": dense * 3 * d * c["intermediate_size"],
        "ffn_moe": (layers - dense) * moe,
    }


def test_k3_params_equal_the_config_derivation(k3):
    expected = k3_params_by_role()
    got = _params_by_role(k3)
    assert sum(got.values()) - sum(expected.values()) == 0
    assert got == expected
    assert sum(expected.values()) == 2_779_931_837_184  # 447,358,976 of them the vision tower


def test_k3_schedule_reads_the_config_layer_lists(k3):
    """full_attn_layers / kda_layers number layers from 1: MLA at 3, 7, …, 91, 92 (0-based);
    the first first_k_dense_replace layers are dense; the layers that open an attention-
    residual block (multiples of attn_res_block_size) use the writing block."""
    la = K3["linear_attn_config"]
    schedule = {r["layer"]: r["template"].split("@")[0] for r in _rows(k3, "layer_schedule")}
    assert sorted(j for j, t in schedule.items() if t == "mla_moe") == [i - 1 for i in la["full_attn_layers"]]
    assert sorted(j for j, t in schedule.items() if t.startswith("kda")) == [i - 1 for i in la["kda_layers"]]
    assert sorted(j for j, t in schedule.items() if t.endswith("_write")) == list(
        range(0, K3["num_hidden_layers"], K3["attn_res_block_size"])
    )
    assert sorted(j for j, t in schedule.items() if "dense" in t) == list(range(K3["first_k_dense_replace"]))


def test_k3_attention_residual_history(k3):
    """The stack input of every 12th layer is archived (layers 0, 12, …, 84: 8 snapshots);
    layer j reads the floor(j / 12) + 1 archived before or at it, grouped by length; the
    output mixture reads all 8."""
    block = K3["attn_res_block_size"]
    (stream,) = _rows(k3, "streams", stream="blocks")
    assert stream["layers"] == list(range(0, K3["num_hidden_layers"], block)) and stream["read"] == "all"
    reads = {r["layer"]: r["elements"] for r in _rows(k3, "stream_reads", stream="blocks") if r["stack"] == "decoder"}
    assert reads == {j: j // block + 1 for j in range(K3["num_hidden_layers"])}
    (final,) = [r for r in _rows(k3, "stream_reads", stream="blocks") if r["stack"] is None]
    assert final["elements"] == len(stream["layers"])
    # the writing block mixes the snapshots alone (its input is the newest), the others add x
    rows = {r["uid"]: r["dim"] for r in _rows(k3, "shapes", phase="prefill") if r["axis"] == 2}
    assert rows["decoder/kda_moe_write@3/self_attention_res_norm"] == "3"
    assert rows["decoder/kda_moe@3/self_attention_res_norm"] == "3 + 1"
    assert rows["decoder/kda_moe_write@3/mlp_res_norm"] == "3 + 1"


def test_k3_kda_flops_per_token(k3):
    """KDA rule per token, bounded gate (gate_lower_bound −5): h·(7·d_k·d_v + 2·d_v +
    (8 + 7)·d_k + 6) = 96·(7·128·128 + 256 + 15·128 + 6) = 11,219,520."""
    la = K3["linear_attn_config"]
    h, dk, dv = la["num_heads"], la["head_dim"], K3["v_head_dim"]
    assert la["gate_lower_bound"] is not None
    terms = _rows(k3, "terms", uid="decoder/kda_moe@1/self_attn.core", phase="decode", quantity="flops")
    assert [(t["coef"], t["e_B"], t["e_s"], t["e_c"]) for t in terms] == [
        (h * (7 * dk * dv + 2 * dv + 15 * dk + 6), 1, 1, 0)
    ]


def test_k3_vision_terms(k3):
    """Per image of v patches (B = 1): patch_embed 2·1024·(3·14·14)·v (Conv2d, no bias);
    pos_emb bicubic 16 taps, (2·16 − 1)·1024·v; each MoonViT layer's attention over all
    patches 12·(4·128 + 5)·v² (qkv_hidden_size 1536 / 12 heads = 128)."""
    v = json.loads((CONFIGS_DIR / "moonshotai__Kimi-K3.json").read_text())["vision_config"]
    heads, dh = v["vt_num_attention_heads"], v["qkv_hidden_size"] // v["vt_num_attention_heads"]

    def terms(uid: str) -> list[tuple]:
        rows = _rows(k3, "terms", uid=uid, phase="prefill", quantity="flops")
        return [(t["coef"], t["e_B"], t["e_s"], t["e_c"], t["factor"], t["factor_arg"]) for t in rows]

    assert terms("patch_embed") == [(2 * v["vt_hidden_size"] * 3 * v["patch_size"] ** 2, 1, 0, 0, "patches", 1)]
    assert terms("pos_emb") == [(31 * v["vt_hidden_size"], 1, 0, 0, "patches", 1)]
    assert terms("vision/moonvit/attention") == [(heads * (4 * dh + 5), 1, 0, 0, "patches", 2)]


def test_k3_cache_per_token_and_fixed_state(catalog_db):
    """MLA layers: (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B per token each, 24 layers;
    KDA layers: 3 conv states of 12288 × 3 (act dtype) and a 96 × 128 × 128 matrix (FP32)
    per request each, 69 layers, whatever the context."""
    la = K3["linear_attn_config"]
    per_token = len(la["full_attn_layers"]) * (K3["kv_lora_rank"] + K3["qk_rope_head_dim"])
    p = la["num_heads"] * la["head_dim"]
    # conv states in the act dtype (2 B in the bf16 rows), the recurrent matrix in FP32 (4 B)
    state_bytes = len(la["kda_layers"]) * (
        3 * p * (la["short_conv_kernel_size"] - 1) * BF16 + la["num_heads"] * la["head_dim"] * K3["v_head_dim"] * 4
    )
    con = connect(catalog_db)
    row = con.execute(
        "select bytes_per_token, state_bytes_per_request, cache_layers from kv_per_token "
        "where model = 'Kimi-K3' and dtype = 'bf16'"
    ).fetchone()
    assert row == (per_token * BF16, state_bytes, K3["num_hidden_layers"])
    by_context = dict(
        con.execute(
            "select context, bytes_per_request from kv_per_request "
            "where model = 'Kimi-K3' and dtype = 'bf16' and phase = 'decode' and batch = 1"
        ).fetchall()
    )
    assert by_context and by_context == {c: per_token * BF16 * c + state_bytes for c in by_context}


# --------------------------------------------------------------------------- bad input


def _k3_spec(tmp_path: Path, old: str, new: str) -> Path:
    text = (MODELS_DIR / "Kimi-K3.yaml").read_text()
    text = text.replace("config: moonshotai__Kimi-K3.json", f"config: {CONFIGS_DIR / 'moonshotai__Kimi-K3.json'}")
    path = tmp_path / "Kimi-K3-broken.yaml"
    path.write_text(edit(text, old, new))
    return path


def _reject(path: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        evaluate(path, library=load_library(models_dir=path.parent))
    assert_all_located(info.value)
    return info.value


def test_config_layer_list_with_a_missing_key(tmp_path):
    path = _k3_spec(
        tmp_path, "linear_attn_config.full_attn_layers, base: 1", "linear_attn_config.full_attn_layer, base: 1"
    )
    issue = located(
        _reject(path), path, line_of(path.read_text(), "full_attn_layer, base"), "$.stacks.decoder.schedule[1].layers"
    )
    assert "full_attn_layer" in issue.message and issue.hint == "did you mean 'full_attn_layers'?"


def test_config_layer_list_must_be_numbers(tmp_path):
    path = _k3_spec(tmp_path, "linear_attn_config.full_attn_layers, base: 1", "linear_attn_config.head_dim, base: 1")
    issue = located(
        _reject(path), path, line_of(path.read_text(), "head_dim, base"), "$.stacks.decoder.schedule[1].layers"
    )
    assert "must be a list of layer numbers" in issue.message


def test_config_layer_list_with_a_wrong_base(tmp_path):
    path = _k3_spec(tmp_path, "full_attn_layers, base: 1", "full_attn_layers, base: 2")
    issue = located(_reject(path), path, line_of(path.read_text(), "base: 2"), "$.stacks.decoder.schedule[1].layers")
    assert issue.expected == "0 or 1"


def test_config_layer_list_counted_from_the_wrong_base(tmp_path):
    """Read 0-based, full_attn_layers names layer 93 of a 93-layer stack."""
    path = _k3_spec(tmp_path, "full_attn_layers, base: 1", "full_attn_layers, base: 0")
    exc = _reject(path)
    assert "layer 93 is outside 0..92" in str(exc)


def test_binding_reads_a_config_list_element_in_range(tmp_path):
    """config.<list>[i] reads one element of a config list; an index past its end is a
    located error naming the list."""
    path = _k3_spec(tmp_path, "merge_kernel_size[0] * config", "merge_kernel_size[2] * config")
    issue = located(
        _reject(path), path, line_of(path.read_text(), "merge_kernel_size[2]"), "$.dims.vision_merge_tokens"
    )
    assert "reads element 2 of list [2, 2]" in issue.message
