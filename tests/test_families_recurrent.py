"""Linear attention and state-space families: fixed-size recurrent state caches, hybrid
schedules read from config per-layer lists, and the Qwen3.5 vision-tower exclusion.

Every expected number is derived here from the config (the arithmetic is written out in
the docstrings), never from the engine."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest
import sympy

from archsql.errors import SpecError
from archsql.evaluator import evaluate
from archsql.evaluator.analysis import node_count
from archsql.schema.expr import RUNTIME_SYMBOLS
from archsql.specs import CONFIGS_DIR, MODELS_DIR, load_library
from archsql.store import connect
from tests.conftest import FIXTURES

B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))
BF16 = 2


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS_DIR / name).read_text())


def _template_cache(analysis, template: str) -> sympy.Expr:
    """Cache elements of one request (B = 1) held by every layer of ``template``, at context c."""
    w = analysis.walks["decode"]
    total = sympy.Integer(0)
    for res in w.results.values():
        if res.node.template == template:
            for fact in res.caches:
                total += w.bind(fact.expr()) * node_count(w, res, symbolic=False)[0]
    return sympy.expand(total.xreplace({B: 1}))


def _role_flops(analysis, phase: str, role: str) -> sympy.Expr:
    w = analysis.walks[phase]
    total = sympy.Integer(0)
    for res in w.results.values():
        if res.node.role == role:
            total += w.bind(res.flops) * node_count(w, res, symbolic=False)[0]
    return sympy.expand(total)


# --------------------------------------------------------------------------- fixed states


def test_gated_deltanet_state_does_not_change_with_context():
    """Qwen3.5-35B-A3B linear-attention layer: the conv keeps kernel − 1 = 3 inputs of its
    2·16·128 + 32·128 = 8192 q/k/v channels (24,576 elements) and the delta rule one
    128 × 128 matrix per value head, 32 · 128 · 128 = 524,288: 548,864 elements per layer
    per request at every context; 30 of the 40 layers are linear."""
    t = _cfg("Qwen__Qwen3.5-35B-A3B.json")["text_config"]
    hk, hv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    dk, dv, k = t["linear_key_head_dim"], t["linear_value_head_dim"], t["linear_conv_kernel_dim"]
    per_layer = (2 * hk * dk + hv * dv) * (k - 1) + hv * dk * dv
    assert per_layer == 24_576 + 524_288
    linear = t["layer_types"].count("linear_attention")
    assert linear == 30
    cache = _template_cache(evaluate("Qwen3.5-35B-A3B"), "linear")
    assert cache.free_symbols == set()
    assert cache == linear * per_layer


def test_mamba2_state_does_not_change_with_context():
    """Nemotron-H-56B Mamba2 layer: conv over x, B, C = 256·64 + 2·8·256 = 20,480 channels
    × 3 kept inputs = 61,440, SSM state 256 heads × 64 × 256 = 4,194,304: 4,255,744
    elements per layer per request at every context, for each of the 54 "M" layers."""
    cfg = _cfg("nvidia__Nemotron-H-56B-Base-8K.json")
    inner = cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
    conv = (inner + 2 * cfg["n_groups"] * cfg["ssm_state_size"]) * (cfg["conv_kernel"] - 1)
    per_layer = conv + inner * cfg["ssm_state_size"]
    assert (conv, per_layer) == (61_440, 4_255_744)
    layers = cfg["hybrid_override_pattern"].count("M")
    a = evaluate("Nemotron-H-56B-Base-8K")
    cache = _template_cache(a, "mamba")
    assert cache.free_symbols == set() and cache == layers * per_layer
    # caches: one conv_state and one ssm_state per Mamba2 layer, both growth 'state'
    rows = {(r["kind"], r["growth"], r["elements"]) for r in a.tables["caches"].to_pylist() if "mamba" in r["uid"]}
    assert rows == {("conv_state", "state", conv), ("ssm_state", "state", inner * cfg["ssm_state_size"])}


def test_mamba1_models_hold_only_fixed_state():
    """mamba-2.8b: 64 layers × (5120 channels × 3 conv inputs + 5120 × 16 state) =
    64 × 97,280 elements per request, none per token; Jamba-v0.1's 28 Mamba layers hold
    8192 × 3 + 8192 × 16 = 155,648 each."""
    m = _cfg("ArthurZ__mamba-2.8b.json")
    inner = m["expand"] * m["hidden_size"]
    assert (
        _template_cache(evaluate("mamba-2.8b"), "mamba")
        == m["num_hidden_layers"] * (inner * (m["conv_kernel"] - 1) + inner * m["state_size"])
        == 64 * 97_280
    )
    j = _cfg("ai21labs__Jamba-v0.1.json")
    inner = j["mamba_expand"] * j["hidden_size"]
    per_layer = inner * (j["mamba_d_conv"] - 1) + inner * j["mamba_d_state"]
    assert per_layer == 155_648
    a = evaluate("Jamba-v0.1")
    assert _template_cache(a, "mamba") + _template_cache(a, "mamba_moe") == 28 * per_layer


def test_recurrent_layers_decode_flops_do_not_grow_with_context():
    """The linear-attention and SSM mixers cost the same per decode token at any context
    (no c in their FLOPs); the attention layers of the same hybrid grow with c."""
    q = evaluate("Qwen3.5-35B-A3B")
    assert C not in _role_flops(q, "decode", "linear_attention").free_symbols
    assert C in _role_flops(q, "decode", "attention").free_symbols
    n = evaluate("Nemotron-H-56B-Base-8K")
    assert C not in _role_flops(n, "decode", "ssm").free_symbols


def test_gated_delta_rule_flops_per_token():
    """One decode token of one Qwen3.5-35B linear layer's delta rule: per value head
    7·dk·dv + 2·dv + 10 (decay, Sᵀk, delta, rank-1 update, output; gates), per key head
    7·dk + 2 (l2-normalized q and k, q scaled): 32·(7·128·128 + 2·128 + 10) + 16·(7·128 + 2)."""
    a = evaluate("Qwen3.5-35B-A3B")
    w = a.walks["decode"]
    (res,) = [r for uid, r in w.results.items() if r.node.op == "gated_delta_rule"]
    assert w.bind(res.flops) == B * S * (32 * (7 * 128 * 128 + 2 * 128 + 10) + 16 * (7 * 128 + 2))


# --------------------------------------------------------------------------- hybrids


@pytest.mark.parametrize(
    ("model", "config", "bytes_per_token", "state_bytes"),
    [
        # 10 full layers × K,V × 2 KV heads × 256 × 2 B; 30 linear layers × (conv 8,192·3 × 2 B
        # in the act dtype + recurrent 32·128·128 × 4 B in FP32)
        ("Qwen3.5-35B-A3B", "Qwen__Qwen3.5-35B-A3B.json", 10 * 2 * 2 * 256 * BF16, 30 * (24_576 * BF16 + 524_288 * 4)),
        # 15 full layers × 2 × 2 × 256 × 2 B; 45 linear layers × (12,288·3 × 2 B + 64·128·128 × 4 B)
        (
            "Qwen3.5-397B-A17B",
            "Qwen__Qwen3.5-397B-A17B.json",
            15 * 2 * 2 * 256 * BF16,
            45 * (36_864 * BF16 + 1_048_576 * 4),
        ),
    ],
)
def test_qwen35_cache_sums_its_two_kinds_of_layers(catalog_db, tmp_path, model, config, bytes_per_token, state_bytes):
    """Cache of one request at context c = full-attention layers × per-token K/V × c
    + linear-attention layers × fixed state, checked against the config and at contexts
    from 1 to 1M in the kv_per_request view."""
    t = _cfg(config)["text_config"]
    full, linear = t["layer_types"].count("full_attention"), t["layer_types"].count("linear_attention")
    hk, hv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    dk, dv = t["linear_key_head_dim"], t["linear_value_head_dim"]
    # the conv state in the act dtype (BF16 rows), the recurrent state in FP32 (config
    # mamba_ssm_dtype: float32; SGLang ServerArgs.mamba_ssm_dtype)
    assert t["mamba_ssm_dtype"] == "float32"
    conv, recurrent = (2 * hk * dk + hv * dv) * (t["linear_conv_kernel_dim"] - 1), hv * dk * dv
    assert bytes_per_token == full * 2 * t["num_key_value_heads"] * t["head_dim"] * BF16
    assert state_bytes == linear * (conv * BF16 + recurrent * 4)
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    con = duckdb.connect(str(db))
    con.execute("delete from workloads")
    contexts = [1, 4096, 131_072, 1_048_576]
    con.executemany("insert into workloads values (?, 'decode', 3, 1, ?)", [(f"c{c}", c) for c in contexts])
    got = dict(
        con.execute(
            "select context, bytes_per_request from kv_per_request where model = ? and dtype = 'bf16'", [model]
        ).fetchall()
    )
    assert got == {c: bytes_per_token * c + state_bytes for c in contexts}
    per_kind = con.execute(
        "select kind, growth, bytes_per_token, state_bytes_per_request from kv_per_token_by_kind "
        "where model = ? and dtype = 'bf16' order by kind",
        [model],
    ).fetchall()
    assert {k: (g, bt, sb) for k, g, bt, sb in per_kind} == {
        "conv_state": ("state", 0, linear * (2 * hk * dk + hv * dv) * (t["linear_conv_kernel_dim"] - 1) * BF16),
        "key": ("per_token", bytes_per_token // 2, 0),
        "recurrent_state": ("state", 0, linear * hv * dk * dv * 4),
        "value": ("per_token", bytes_per_token // 2, 0),
    }


@pytest.mark.parametrize(
    ("model", "config", "mapping"),
    [
        ("Nemotron-H-56B-Base-8K", "nvidia__Nemotron-H-56B-Base-8K.json", {"M": "mamba", "*": "attention", "-": "mlp"}),
        (
            "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
            "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
            {"M": "mamba", "*": "attention", "E": "moe"},
        ),
    ],
)
def test_nemotron_h_pattern_coverage(model, config, mapping):
    """Every character of hybrid_override_pattern becomes its layer's template, in order;
    the cached layers are exactly the "M" (state) and "*" (K/V) ones."""
    pattern = _cfg(config)["hybrid_override_pattern"]
    a = evaluate(model)
    schedule = [r["template"] for r in sorted(a.tables["layer_schedule"].to_pylist(), key=lambda r: r["layer"])]
    assert schedule == [mapping[ch] for ch in pattern]
    assert set(pattern) == set(mapping)
    cached = {r["uid"].split("/")[1]: r["growth"] for r in a.tables["caches"].to_pylist()}
    assert cached == {"mamba": "state", "attention": "per_token"}


def test_jamba_schedule_from_periods_and_offsets():
    """attention where i % attn_layer_period == attn_layer_offset (4, 12, 20, 28), MoE FFN
    where i % expert_layer_period == expert_layer_offset (odd layers), Mamba + dense FFN on
    the rest (`layers: rest`)."""
    cfg = _cfg("ai21labs__Jamba-v0.1.json")
    expected = []
    for i in range(cfg["num_hidden_layers"]):
        if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"]:
            expected.append("attention")
        elif i % cfg["expert_layer_period"] == cfg["expert_layer_offset"]:
            expected.append("mamba_moe")
        else:
            expected.append("mamba")
    rows = evaluate("Jamba-v0.1").tables["layer_schedule"].to_pylist()
    assert [r["template"] for r in sorted(rows, key=lambda r: r["layer"])] == expected
    assert expected.count("attention") == 4 and expected.count("mamba_moe") == 16


# --------------------------------------------------------------------------- bad input


def _spec_dir(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    return models


def _line(text: str, needle: str) -> int:
    (line,) = [i for i, row in enumerate(text.splitlines(), 1) if needle in row]
    return line


def test_schedule_missing_a_config_value_is_rejected(tmp_path):
    """Nemotron-H-56B's pattern has "-" (MLP) layers; a map without "-" is rejected at the
    schedule line, naming the value and how to map it."""
    text = (MODELS_DIR / "Nemotron-H-56B-Base-8K.yaml").read_text()
    text = text.replace("config: nvidia__", f"config: {CONFIGS_DIR}/nvidia__")
    old = 'map: { M: mamba, "*": attention, "-": mlp }'
    assert text.count(old) == 1
    text = text.replace(old, 'map: { M: mamba, "*": attention }').replace("  mlp: { mixer: relu2_mlp }\n", "")
    path = _spec_dir(tmp_path) / "broken_nemotron.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        evaluate(path, library=load_library(models_dir=path.parent))
    (issue,) = [i for i in info.value.issues if "does not cover" in i.message]
    assert issue.message == "schedule does not cover config value(s) '-' of config.hybrid_override_pattern"
    assert (issue.file, issue.line, issue.path) == (str(path), _line(text, "schedule:"), "$.stacks.decoder.schedule")
    assert "'-': <template>" in issue.hint


def test_jamba_attention_on_a_moe_layer_is_rejected(tmp_path):
    """A config whose attention layer is also a MoE layer (attn_layer_offset 5, odd) needs a
    template of its own: both schedule entries claim layer 5, and the error says so at the
    entry that claims it second."""
    cfg = _cfg("ai21labs__Jamba-v0.1.json") | {"attn_layer_offset": 5}
    config = tmp_path / "jamba_offset5.json"
    config.write_text(json.dumps(cfg))
    text = (
        (MODELS_DIR / "Jamba-v0.1.yaml").read_text().replace("config: ai21labs__Jamba-v0.1.json", f"config: {config}")
    )
    path = _spec_dir(tmp_path) / "broken_jamba.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        evaluate(path, library=load_library(models_dir=path.parent))
    issues = [i for i in info.value.issues if "scheduled twice" in i.message]
    assert issues and issues[0].message == "layer 5 is scheduled twice (attention and mamba_moe)"
    assert (issues[0].line, issues[0].path) == (_line(text, "expert_offset::"), "$.stacks.decoder.schedule[1]")


# --------------------------------------------------------------------------- vision tower


@pytest.mark.parametrize(
    "config", ["Qwen__Qwen3.5-27B.json", "Qwen__Qwen3.5-35B-A3B.json", "Qwen__Qwen3.5-397B-A17B.json"]
)
def test_qwen35_vision_tower_exclusion_is_exactly_the_vision_config(config):
    """The catalog models Qwen3.5's language model only; the inventory tensors left out
    (model.visual.*) are exactly the vision tower vision_config describes:
    patch embed Conv3d h·3·2·16·16 + h, position table 2304·h, depth × (two LayerNorms 4h,
    qkv 3h·h + 3h, proj h·h + h, MLP 2·I·h + I + h), merger (LayerNorm 2h, fc1 (4h)² + 4h,
    fc2 out·4h + out) with h = 1152, I = 4304, spatial merge 2 × 2."""
    v = _cfg(config)["vision_config"]
    h, inter, m2, out = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"] ** 2, v["out_hidden_size"]
    assert v["deepstack_visual_indexes"] == []
    patch = h * v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 + h
    block = 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * inter * h + inter + h
    merger = 2 * h + (h * m2) ** 2 + h * m2 + out * h * m2 + out
    derived = patch + v["num_position_embeddings"] * h + v["depth"] * block + merger
    with gzip.open(FIXTURES / "meta_inventories" / config.replace(".json", ".json.gz")) as f:
        inv = json.load(f)
    excluded = sum(math.prod(t["shape"]) for t in inv["checkpoint_tensors"] if t["name"].startswith("model.visual."))
    assert excluded == derived


# --------------------------------------------------------------------------- MTP


def test_qwen35_mtp_module_is_on_disk_but_not_in_the_base_model(catalog_db):
    """Qwen3.5-35B-A3B's multi-token-prediction module (mtp.*, dropped on load by
    transformers): fc 2·d·d, three norms 3·d, and one full-attention MoE decoder layer —
    attention q 2·16·256·d + k, v 2·256·d each + o d·4096 + q/k norms 2·256; MoE router
    256·d, 256 experts × 3·512·d, shared expert 3·512·d + its gate d; two norms 2·d —
    with d = 2048: 844,640,768 parameters.  They count in params, not in the base model's
    active parameters, FLOPs or caches."""
    t = _cfg("Qwen__Qwen3.5-35B-A3B.json")["text_config"]
    d, h, kv, hd = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    e, ffe, ffs = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
    attention = 2 * h * hd * d + 2 * kv * hd * d + d * h * hd + 2 * hd
    moe = e * d + e * 3 * ffe * d + 3 * ffs * d + d
    mtp = 2 * d * d + 3 * d + attention + moe + 2 * d
    assert mtp == 844_640_768
    con = connect(catalog_db)
    params, active, mtp_params = con.execute(
        "select params, active_params, mtp_params from model_summary where model = 'Qwen3.5-35B-A3B'"
    ).fetchone()
    assert mtp_params == mtp
    lm = params - mtp  # the language model: 40 decoder layers, embedding, norm, head
    assert active < lm
    (cache_layers,) = con.execute(
        "select cache_layers from kv_per_token where model = 'Qwen3.5-35B-A3B' and dtype = 'bf16'"
    ).fetchone()
    assert cache_layers == t["num_hidden_layers"]
