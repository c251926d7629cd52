"""Sparse and per-layer-type attention families: DeepSeek sparse attention (DeepSeek-V3.2,
GLM-5), hybrid sliding/full attention with its own sizes per layer type (MiMo-V2-Flash),
full-width QK-norm MoE (MiniMax-M2.5), Qwen3-VL's vision tower.  Every expected value is
derived here from the config.json snapshot, with the derivation written out."""

from __future__ import annotations

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
from archsql.evaluator.factors import window_pairs_int
from archsql.schema.expr import RUNTIME_SYMBOLS
from archsql.specs import MODELS_DIR, load_library

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def _flops(analysis, phase: str, keep=lambda res: True, stack: str = "decoder") -> sympy.Expr:
    """Bound FLOPs of the kept nodes of one stack, all copies."""
    w = analysis.walks[phase]
    total = sympy.Integer(0)
    for res in w.results.values():
        if res.node.stack == stack and keep(res):
            total += w.bind(res.flops) * node_count(w, res, symbolic=False)[0]
    return sympy.expand(total)


def _attention(res) -> bool:
    return res.node.role == "attention"


def _cache(analysis, stack: str = "decoder") -> sympy.Expr:
    """Cache elements of all layers of one stack (B requests at context c), bound."""
    w = analysis.walks["decode"]
    total = sympy.Integer(0)
    for res in w.results.values():
        if res.node.stack == stack:
            for fact in res.caches:
                total += w.bind(fact.expr()) * node_count(w, res, symbolic=False)[0]
    return sympy.expand(total)


@pytest.fixture(scope="module")
def v3():
    return evaluate("DeepSeek-V3")


@pytest.fixture(scope="module")
def v32():
    return evaluate("DeepSeek-V3.2")


# --------------------------------------------------------------------------- DSA


def _dsa_sizes(cfg: dict) -> dict:
    return {
        "layers": cfg["num_hidden_layers"],
        "d": cfg["hidden_size"],
        "h": cfg["num_attention_heads"],
        "q_lora": cfg["q_lora_rank"],
        "kv_lora": cfg["kv_lora_rank"],
        "nope": cfg["qk_nope_head_dim"],
        "rope": cfg["qk_rope_head_dim"],
        "v": cfg["v_head_dim"],
        "hi": cfg["index_n_heads"],
        "di": cfg["index_head_dim"],
        "topk": cfg["index_topk"],
    }


def _indexer_per_token(z: dict) -> int:
    """c-independent indexer FLOPs per token per layer: wq_b (2·q_lora·hi·di), wk (2·d·di),
    k_norm LayerNorm (7·di), weights_proj (2·d·hi), RoPE on the first qk_rope features of
    every indexer query head (3·hi·rope) and of the one key (3·rope)."""
    return (
        2 * z["q_lora"] * z["hi"] * z["di"]
        + 2 * z["d"] * z["di"]
        + 7 * z["di"]
        + 2 * z["d"] * z["hi"]
        + 3 * z["hi"] * z["rope"]
        + 3 * z["rope"]
    )


def _indexer_per_pair(z: dict) -> int:
    """Per (query, visible key) pair: hi dot products of di (2·hi·di), relu, head weight and
    sum over heads (3·hi), and one top-k compare."""
    return z["hi"] * (2 * z["di"] + 3) + 1


def test_dsa_configs_share_the_mla_sizes_of_deepseek_v3():
    """The DSA-vs-MLA comparisons below rely on DeepSeek-V3.2 having V3's sizes."""
    v3, v32 = _cfg("deepseek-ai__DeepSeek-V3.json"), _cfg("deepseek-ai__DeepSeek-V3.2.json")
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads", "q_lora_rank", "kv_lora_rank")
    keys += ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace", "n_routed_experts")
    assert {k: v3[k] for k in keys} == {k: v32[k] for k in keys}
    assert "index_topk" not in v3


def test_dsa_decode_attention_is_capped_at_index_topk_while_the_indexer_grows(v3, v32):
    """One decode token (B = s = 1) at context c, decoder layers.  Both models decode with
    absorbed MLA: per attended key 2·h·(kv_lora + rope) (score) + 5·h (softmax) + 2·h·kv_lora
    (apply).  V3 attends c keys, V3.2 min(c, index_topk); V3.2 adds its indexer:
    _indexer_per_token + _indexer_per_pair · c.  So per layer
        V3.2 − V3 = indexer_per_token + indexer_per_pair·c − per_key·(c − min(c, topk))."""
    z = _dsa_sizes(_cfg("deepseek-ai__DeepSeek-V3.2.json"))
    assert (z["hi"], z["di"], z["topk"]) == (64, 128, 2048)
    components = {r["component"] for r in v32.tables["nodes"].to_pylist() if r["role"] == "attention"}
    assert components == {"mla_dsa_attention"}  # one (absorbed) form in both phases
    per_key = 2 * z["h"] * (z["kv_lora"] + z["rope"]) + 5 * z["h"] + 2 * z["h"] * z["kv_lora"]
    sparse_ops = ("sparse_attention_score", "sparse_softmax", "sparse_attention_apply")
    sparse = _flops(v32, "decode", lambda r: r.node.op in sparse_ops).xreplace({B: 1, S: 1})
    indexer = _flops(v32, "decode", lambda r: r.node.op in ("indexer_logits", "topk_keys")).xreplace({B: 1, S: 1})
    dsa = _flops(v32, "decode", _attention).xreplace({B: 1, S: 1})
    mla = _flops(v3, "decode", _attention).xreplace({B: 1, S: 1})
    for c in (1, 1000, 2048, 2049, 10_000, 163_840):
        assert sparse.xreplace({C: c}) == z["layers"] * per_key * min(c, z["topk"])
        assert indexer.xreplace({C: c}) == z["layers"] * _indexer_per_pair(z) * c
        expected = _indexer_per_token(z) + _indexer_per_pair(z) * c - per_key * (c - min(c, z["topk"]))
        assert (dsa - mla).xreplace({C: c}) == z["layers"] * expected
    # past index_topk the attention no longer grows; the indexer does
    assert sparse.xreplace({C: 4096}) == sparse.xreplace({C: 100_000})
    assert indexer.xreplace({C: 100_000}) == 25 * indexer.xreplace({C: 4000})


def test_dsa_prefill_pairs_are_window_pairs_of_index_topk(v3, v32):
    """A fresh prefill of s tokens (c = s): query j attends min(j, index_topk) keys, the same
    sum as a window (window_pairs(s, s, topk)); the indexer scores all s(s+1)/2 causal pairs.
    DSA prefills in MLA's absorbed form (the sparse kernel's MQA over the latent), V3 in the
    expanded form, so per attended key DSA costs 2·h·(kv_lora + rope) + 5·h + 2·h·kv_lora and
    V3 2·h·(nope + rope) + 5·h + 2·h·v.  The per-token matmuls are equal: V3's kv_b_proj
    on the latent (2·kv_lora·h·(nope + v)) is exactly DSA's q·W_UK (2·h·nope·kv_lora) plus
    the output's ·W_UV (2·h·kv_lora·v)."""
    z = _dsa_sizes(_cfg("deepseek-ai__DeepSeek-V3.2.json"))
    s = 5000
    pairs = sum(min(j, z["topk"]) for j in range(1, s + 1))
    assert pairs == window_pairs_int(s, s, z["topk"])
    causal = s * (s + 1) // 2
    per_key_absorbed = 2 * z["h"] * (z["kv_lora"] + z["rope"]) + 5 * z["h"] + 2 * z["h"] * z["kv_lora"]
    per_key_expanded = 2 * z["h"] * (z["nope"] + z["rope"]) + 5 * z["h"] + 2 * z["h"] * z["v"]
    assert (
        2 * z["kv_lora"] * z["h"] * (z["nope"] + z["v"])
        == 2 * z["h"] * z["nope"] * z["kv_lora"] + 2 * z["h"] * z["kv_lora"] * z["v"]
    )
    point = {B: 1, S: s, C: s}
    dsa = _flops(v32, "prefill", _attention).xreplace(point)
    mla = _flops(v3, "prefill", _attention).xreplace(point)
    expected = _indexer_per_token(z) * s + _indexer_per_pair(z) * causal + per_key_absorbed * pairs
    expected -= per_key_expanded * causal
    assert dsa - mla == z["layers"] * expected


def test_dsa_formula_shows_the_named_factor(v32):
    """The stored term rows of the sparse score use the window_pairs factor with the topk
    argument in both phases (decode keeps s symbolic for speculative steps; at s = 1 the
    factor is min(c, topk), as the decode test above checks in numbers)."""
    terms = [
        r
        for r in v32.tables["terms"].to_pylist()
        if r["uid"] == "decoder/moe/self_attn.scores" and r["quantity"] == "flops"
    ]
    factors = {(r["phase"], r["factor"], r["factor_arg"]) for r in terms}
    assert factors == {("prefill", "window_pairs", 2048), ("decode", "window_pairs", 2048)}


@pytest.mark.parametrize(
    ("model", "config"), [("DeepSeek-V3.2", "deepseek-ai__DeepSeek-V3.2.json"), ("GLM-5", "zai-org__GLM-5.json")]
)
def test_dsa_index_cache_adds_index_head_dim_per_token_per_layer(model, config):
    """Per token and layer: the MLA latent (kv_lora_rank) + the shared rope key
    (qk_rope_head_dim) + one index key (index_head_dim) — DeepSeek-V3.2: (512 + 64 + 128) ×
    61 = 42,944 elements, 85,888 bytes in BF16; GLM-5: (512 + 64 + 128) × 78 = 54,912.  The
    index keys are never capped: every position stays selectable."""
    cfg = _cfg(config)
    a = evaluate(model)
    per_layer = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"] + cfg["index_head_dim"]
    kinds = {(r["kind"], r["growth"], r["elements"]) for r in a.tables["caches"].to_pylist()}
    assert kinds == {
        ("latent", "per_token", cfg["kv_lora_rank"]),
        ("rope_key", "per_token", cfg["qk_rope_head_dim"]),
        ("index_key", "per_token", cfg["index_head_dim"]),
    }
    cache = _cache(a)
    assert cache == per_layer * cfg["num_hidden_layers"] * B * C
    assert {"DeepSeek-V3.2": 42_944, "GLM-5": 54_912}[model] == per_layer * cfg["num_hidden_layers"]


@pytest.mark.parametrize(("context", "expected_bytes"), [(32768, 407_764_992), (1024, 80_203_776)])
def test_dsa_decode_reads_the_selected_latents_and_every_index_key(catalog_db, tmp_path, context, expected_bytes):
    """One DeepSeek-V3.2 decode step (batch 1, kv dtype BF16) at context c reads, in each of
    the 61 layers: the latent (kv_lora_rank 512) and rope key (qk_rope_head_dim 64) of the
    min(c, index_topk = 2048) positions its top-k selected, in BF16, and the index key
    (index_head_dim 128, stored FP8 + one FP32 scale per 128: 132 B) of all c positions,
    which the lightning indexer scores:
      c = 32768: (2048 × 576 × 2 + 32768 × 132) × 61 = (2,359,296 + 4,325,376) × 61
                 = 407,764,992 bytes — a sixth of the 2,566,520,832 bytes the cache holds
                 ((576 × 2 + 132) × 32768 × 61);
      c = 1024 (below index_topk, every position selected): (1024 × 1152 + 1024 × 132) × 61
                 = 80,203,776 bytes, the whole cache."""
    cfg = _cfg("deepseek-ai__DeepSeek-V3.2.json")
    index_key = cfg["index_head_dim"] * 1 + cfg["index_head_dim"] // 128 * 4
    selected = min(context, cfg["index_topk"]) * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2
    per_layer = selected + context * index_key
    assert per_layer * cfg["num_hidden_layers"] == expected_bytes
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    con = duckdb.connect(str(db))
    con.execute("insert into workloads values ('probe', 'decode', 1, 1, ?)", [context])
    got = con.execute(
        "select r.bytes_read, k.bytes from decode_cache_reads r join kv_per_request k using (model, workload, dtype) "
        "where model = 'DeepSeek-V3.2' and workload = 'probe' and dtype = 'bf16'"
    ).fetchone()
    con.close()
    # the cache held: latent + rope key in the kv dtype (BF16), the index key in FP8 with one
    # FP32 scale per 128, read in the same bytes
    whole = (2 * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) + index_key) * context * 61
    assert got == (expected_bytes, whole)
    assert (expected_bytes < whole) == (context > cfg["index_topk"])


# --------------------------------------------------------------------------- MiMo-V2-Flash


def test_mimo_kv_per_token_by_layer_type():
    """hybrid_layer_pattern: 0 = full attention (num_key_value_heads = 4 KV heads), 1 = a
    window of sliding_window = 128 keys with swa_num_key_value_heads = 8.  K is head_dim = 192
    wide, V v_head_dim = 128.  Full layer: 4 × (192 + 128) = 1,280 elements per token;
    sliding layer: 8 × 320 = 2,560, held for at most 128 positions.  9 full, 39 sliding:
    below the window 9 × 1,280 + 39 × 2,560 = 111,360 elements (222,720 bytes BF16) per
    token; beyond it only the full layers grow."""
    cfg = _cfg("XiaomiMiMo__MiMo-V2-Flash.json")
    pattern, window = cfg["hybrid_layer_pattern"], cfg["sliding_window"]
    full, swa = pattern.count(0), pattern.count(1)
    assert (full, swa, window) == (9, 39, 128)
    per_full = cfg["num_key_value_heads"] * (cfg["head_dim"] + cfg["v_head_dim"])
    per_swa = cfg["swa_num_key_value_heads"] * (cfg["head_dim"] + cfg["v_head_dim"])
    assert full * per_full + swa * per_swa == 111_360
    cache = _cache(evaluate("MiMo-V2-Flash")).xreplace({B: 1})
    for c in (1, 100, 128, 129, 4096, 262_144):
        assert cache.xreplace({C: c}) == full * per_full * c + swa * per_swa * min(c, window)


def test_mimo_templates_bind_their_own_sizes():
    """The sliding-window template reads n_kv_heads as n_kv_heads_swa (template dims), the
    full templates a window of 0: k_proj is [8·192, 4096] in sliding layers and [4·192,
    4096] in full ones, and the symbolic formula names the per-type dim."""
    cfg = _cfg("XiaomiMiMo__MiMo-V2-Flash.json")
    a = evaluate("MiMo-V2-Flash")
    shapes = {r["uid"]: r["shape"] for r in a.tables["weights"].to_pylist()}
    d, hd = cfg["hidden_size"], cfg["head_dim"]
    assert shapes["decoder/swa_moe/self_attn.k_proj"] == [cfg["swa_num_key_value_heads"] * hd, d]
    assert shapes["decoder/full_moe/self_attn.k_proj"] == [cfg["num_key_value_heads"] * hd, d]
    assert shapes["decoder/full_dense/self_attn.v_proj"] == [cfg["num_key_value_heads"] * cfg["v_head_dim"], d]
    formula = {
        (r["uid"], r["phase"]): r["symbolic"]
        for r in a.tables["formulas"].to_pylist()
        if r["quantity"] == "flops" and r["uid"].endswith("self_attn.k_proj")
    }
    assert "n_kv_heads_swa" in formula[("decoder/swa_moe/self_attn.k_proj", "prefill")]
    assert "n_kv_heads_swa" not in formula[("decoder/full_moe/self_attn.k_proj", "prefill")]
    schedule = [r["template"] for r in a.tables["layer_schedule"].to_pylist()]
    expected = [
        {(0, 0): "full_dense", (0, 1): "full_moe", (1, 1): "swa_moe"}[(p, m)]
        for p, m in zip(cfg["hybrid_layer_pattern"], cfg["moe_layer_freq"], strict=True)
    ]
    assert schedule == expected
    sinks = [r for r in a.tables["weights"].to_pylist() if r["name"].endswith("attention_sink_bias")]
    assert [(r["uid"], r["name"], r["shape"]) for r in sinks] == [
        ("decoder/swa_moe/self_attn.probs", "model.layers.{layer}.self_attn.attention_sink_bias", [64])
    ]


def test_minimax_kv_per_token():
    """Every one of the 62 layers is full attention with 8 KV heads of head_dim 128:
    62 × 2 × 8 × 128 = 126,976 elements (253,952 bytes BF16) per token, at any context."""
    cfg = _cfg("MiniMaxAI__MiniMax-M2.5.json")
    per_token = cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * cfg["head_dim"]
    assert per_token == 126_976
    assert _cache(evaluate("MiniMax-M2.5")) == per_token * B * C


# --------------------------------------------------------------------------- bad input


MIMO = (MODELS_DIR / "MiMo-V2-Flash.yaml").read_text()


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _line(text: str, needle: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, needle
    return hits[0]


def _reject(tmp_path: Path, text: str) -> tuple[SpecError, Path]:
    models = tmp_path / "models"
    models.mkdir()
    path = models / "broken_mimo.yaml"
    path.write_text(text.replace("model: MiMo-V2-Flash", "model: broken_mimo"))
    with pytest.raises(SpecError) as info:
        evaluate(path, library=load_library(models_dir=models))
    return info.value, path


def test_template_dims_unknown_dim_is_located(tmp_path):
    text = _edit(MIMO, "dims: { n_kv_heads: n_kv_heads_swa }", "dims: { n_kv_head: n_kv_heads_swa }")
    exc, path = _reject(tmp_path, text)
    issue = next(i for i in exc.issues if "n_kv_head'" in i.message)
    assert (issue.file, issue.line, issue.path) == (
        str(path),
        _line(text, "n_kv_head:"),
        "$.templates.swa_moe.dims.n_kv_head",
    )
    assert "n_kv_heads" in issue.hint


def test_template_dims_override_nobody_reads(tmp_path):
    text = _edit(MIMO, "dims: { n_kv_heads: n_kv_heads_swa }", "dims: { n_kv_heads: n_kv_heads_swa, d_ff: 7 }")
    exc, path = _reject(tmp_path, text)
    issue = next(i for i in exc.issues if "overrides dim 'd_ff'" in i.message)
    assert issue.path == "$.templates.swa_moe.dims.d_ff" and issue.file == str(path)


def test_template_dims_value_must_be_a_dim_expression(tmp_path):
    text = _edit(MIMO, "dims: { n_kv_heads: n_kv_heads_swa }", "dims: { n_kv_heads: config.swa_num_key_value_heads }")
    exc, _ = _reject(tmp_path, text)
    issue = next(i for i in exc.issues if i.path == "$.templates.swa_moe.dims.n_kv_heads")
    assert "dim expression" in issue.expected


def test_template_dims_must_be_a_mapping(tmp_path):
    text = _edit(MIMO, "dims: { n_kv_heads: n_kv_heads_swa }", "dims: [n_kv_heads_swa]")
    exc, path = _reject(tmp_path, text)
    issue = next(i for i in exc.issues if i.path == "$.templates.swa_moe.dims")
    assert (issue.file, issue.line) == (str(path), _line(text, "dims: [n_kv_heads_swa]"))
    assert "mapping" in issue.expected


def test_schedule_from_two_config_lists_must_cover_every_combination(tmp_path):
    text = _edit(MIMO, ', "1,1": swa_moe', "")
    exc, path = _reject(tmp_path, text)
    issue = next(i for i in exc.issues if "does not cover" in i.message)
    assert "'1,1'" in issue.message and "config.hybrid_layer_pattern × config.moe_layer_freq" in issue.message
    assert issue.file == str(path) and issue.path == "$.stacks.decoder.schedule"


# --------------------------------------------------------------------------- Qwen3-VL


def test_qwen3_vl_vision_tower_is_the_vision_config():
    """The vision tower (role vision: model.visual.*) of the spec and of the inventory is
    exactly what vision_config describes, counted here:
    patch embedding Conv3d (hidden · in_channels · temporal_patch · patch² + bias), learned
    positions (num_position_embeddings · hidden); per block two LayerNorms (4·hidden), fused
    qkv (3·hidden² + 3·hidden), proj (hidden² + hidden), MLP (2·hidden·ffn + ffn + hidden);
    the merger (LayerNorm over hidden, then merged = hidden · spatial_merge² → merged → out)
    and one DeepStack merger per deepstack_visual_indexes entry (LayerNorm over merged, same
    two linears)."""
    from tests.conftest import load_inventory
    from tests.test_inventory_params import NOT_MODELED

    assert "Qwen3-VL-8B-Instruct" not in NOT_MODELED
    v = _cfg("Qwen__Qwen3-VL-8B-Instruct.json")["vision_config"]
    h, ffn, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    merged = h * v["spatial_merge_size"] ** 2
    patch = h * v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 + h
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (2 * h * ffn + ffn + h)

    def merger(norm: int) -> int:
        return 2 * norm + (merged * merged + merged) + (merged * out + out)

    expected = (
        patch
        + v["num_position_embeddings"] * h
        + v["depth"] * block
        + merger(h)
        + len(v["deepstack_visual_indexes"]) * merger(merged)
    )
    inv = load_inventory("Qwen__Qwen3-VL-8B-Instruct.json")
    visual = [t for t in inv["checkpoint_tensors"] if t["name"].startswith("model.visual.")]
    assert sum(math.prod(t["shape"]) for t in visual) == expected
    a = evaluate("Qwen3-VL-8B-Instruct")
    count = {r["uid"]: r["count"] for r in a.tables["instances"].to_pylist()}
    vision = {r["uid"] for r in a.tables["nodes"].to_pylist() if r["role"] == "vision"}
    spec = sum(math.prod(w["shape"]) * count[w["uid"]] for w in a.tables["weights"].to_pylist() if w["uid"] in vision)
    assert spec == expected
