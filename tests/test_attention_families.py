"""Attention and memory families: MLA (absorbed decode), sliding windows, MTP stacks."""

from __future__ import annotations

import json
from pathlib import Path

import sympy

from archsql.evaluator import evaluate
from archsql.evaluator.analysis import node_count
from archsql.evaluator.factors import window_pairs_int
from archsql.schema.expr import RUNTIME_SYMBOLS

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))


def _role_flops(analysis, phase: str, role: str, stack: str = "decoder") -> sympy.Expr:
    w = analysis.walks[phase]
    total = sympy.Integer(0)
    for res in w.results.values():
        if res.node.role == role and res.node.stack == stack:
            total += w.bind(res.flops) * node_count(w, res, symbolic=False)[0]
    return sympy.expand(total)


def test_mla_decode_runs_the_absorbed_form():
    """Decode uses mla_attention_absorbed; per layer and token at context c it differs from
    the naive (prefill) form run on one token by exactly 2·H·(2·kv_lora − nope − v)·c FLOPs:
    the q/kv_b projections cost the same (2·H·nope·kv_lora + 2·H·kv_lora·v = 2·kv_lora·H·(nope+v)),
    while score and apply run over the latent: 2·H·(kv_lora+rope)·c + 2·H·kv_lora·c instead of
    2·H·(nope+rope)·c + 2·H·v·c."""
    cfg = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())
    h, kv_lora = cfg["num_attention_heads"], cfg["kv_lora_rank"]
    nope, v, layers = cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg["num_hidden_layers"]
    a = evaluate("DeepSeek-V3")
    components = {
        n["component"] for n in a.tables["nodes"].to_pylist() if n["phase"] == "decode" and n["role"] == "attention"
    }
    assert components == {"mla_attention_absorbed"}
    prefill_form = _role_flops(a, "prefill", "attention").xreplace({B: 1, S: 1})
    decode_form = _role_flops(a, "decode", "attention").xreplace({B: 1, S: 1})
    assert sympy.expand(decode_form - prefill_form) == layers * 2 * h * (2 * kv_lora - nope - v) * C


def test_mla_cache_is_latent_plus_rope_key_per_layer():
    """(kv_lora_rank + qk_rope_head_dim) elements per token per layer, for each of the 61
    decoder layers (and the MTP layer's own cache, kept separately)."""
    cfg = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())
    a = evaluate("DeepSeek-V3")
    rows = a.tables["caches"].to_pylist()
    counts = {r["uid"]: r["count"] for r in a.tables["instances"].to_pylist()}
    decoder = [r for r in rows if r["uid"].startswith("decoder/")]
    per_token = sum(r["elements"] * counts[r["uid"]] for r in decoder)
    assert per_token == (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * cfg["num_hidden_layers"]
    assert {r["kind"] for r in rows} == {"latent", "rope_key"}
    mtp = [r for r in rows if r["uid"].startswith("mtp/")]
    assert sum(r["elements"] for r in mtp) == cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]


def test_sliding_window_caches_and_attention_stop_growing_at_the_window():
    """Mistral-7B attends a 4096-key window: K/V per layer hold min(c, 4096) positions, and
    the score FLOPs of a prefill follow the exact windowed pair count."""
    cfg = json.loads((CONFIGS / "mistralai__Mistral-7B-Instruct-v0.1.json").read_text())
    w, layers = cfg["sliding_window"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * cfg["hidden_size"] // cfg["num_attention_heads"]
    a = evaluate("Mistral-7B-Instruct-v0.1")
    caches = a.tables["caches"].to_pylist()
    assert {(r["growth"], r["window"]) for r in caches} == {("window", w)}
    w_ = a.walks["decode"]
    cache = sympy.Integer(0)
    for res in w_.results.values():
        for fact in res.caches:
            cache += w_.bind(fact.expr()) * node_count(w_, res, symbolic=False)[0]
    at = {c: cache.xreplace({B: 1, C: c}) for c in (1000, 4096, 5000, 100_000)}
    assert at[1000] == 2 * layers * kv * 1000
    assert at[4096] == at[5000] == at[100_000] == 2 * layers * kv * w
    # Prefill attention FLOPs against Llama-3.1-8B, whose attention has the same shapes
    # (32 heads, 8 KV heads, head dim 128, d_model 4096, 32 layers) but no window: projections
    # and rope cost the same, so the difference is score + softmax + apply over the pairs the
    # window removes: layers · (2·H·d_head + 5·H + 2·H·d_head) · (s(s+1)/2 − Σ_{j=1}^{s} min(j, w)).
    s = 10_000
    pairs = sum(min(j, w) for j in range(1, s + 1))
    assert pairs == window_pairs_int(s, s, w)
    heads, d_head = cfg["num_attention_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    point = {B: 1, S: s, C: s}
    windowed = _role_flops(a, "prefill", "attention").xreplace(point)
    full = _role_flops(evaluate("Meta-Llama-3.1-8B"), "prefill", "attention").xreplace(point)
    assert full - windowed == layers * (4 * heads * d_head + 5 * heads) * (s * (s + 1) // 2 - pairs)


def test_mtp_stack_is_separate_and_absent_when_the_config_has_none():
    ds = evaluate("DeepSeek-V3").tables["stacks"].to_pylist()
    kimi = evaluate("Kimi-K2-Instruct").tables["stacks"].to_pylist()
    assert {(r["stack"], r["role"], r["layers"], r["first_layer"]) for r in ds} == {
        ("decoder", "decoder", 61, 0),
        ("mtp", "mtp", 1, 61),
    }
    assert {(r["stack"], r["layers"]) for r in kimi} == {("decoder", 61), ("mtp", 0)}


def test_mla_decode_reads_the_latent_once():
    """Absorbed MLA attends over the cached latent + rope key as keys and the same latent as
    values; a fused kernel (FlashMLA) reads each cached position once: per layer and request
    (kv_lora_rank + qk_rope_head_dim)·c elements, not (2·kv_lora_rank + rope)·c."""
    cfg = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())
    a = evaluate("DeepSeek-V3")
    w = a.walks["decode"]
    reads = sympy.Integer(0)
    for res in w.results.values():
        if res.node.stack == "decoder":
            reads += w.bind(res.io[2]) * node_count(w, res, symbolic=False)[0]
    per_position = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    assert sympy.expand(reads) == cfg["num_hidden_layers"] * per_position * B * C
