"""Sliding-window, sink, soft-capped and chunked attention families, each against values
derived by hand from the model's config.json (archsql/specs/configs):

* gpt-oss: config.layer_types alternates sliding (window of sliding_window keys) and full
  attention; a learned sink per head; stacked MoE experts.
* Gemma-2: no layer_types in the config, so transformers' Gemma2Config default applies —
  "sliding_attention" where (i + 1) % 2, i.e. even layers; soft-capped scores and logits;
  scaled embeddings; tied lm_head.
* Llama-4: chunked local attention (attention_chunk_size C) on the RoPE layers, global NoPE
  attention where (i + 1) % 4 == 0 (Llama4TextConfig's no_rope_layers default).  A query at
  1-based position j sees the (j − 1) mod C + 1 keys of its own chunk, so a chunked layer's
  cache after a step ending at context c keeps (c − 1) mod C + 1 positions and a prefill of
  s tokens attends Σ_j ((j − 1) mod C + 1) pairs.
* GLM-4.7: partial RoPE, MTP layer after the decoder layers.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import sympy

from archsql.errors import ShapeError
from archsql.evaluator import evaluate
from archsql.evaluator.analysis import node_count
from archsql.evaluator.factors import chunk_len, chunk_len_int, chunk_pairs_int
from archsql.evaluator.terms import evaluate_terms
from archsql.schema.expr import RUNTIME_SYMBOLS
from archsql.specs import COMPONENTS_DIR, load_library
from archsql.store import connect

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def _by_template(analysis, phase: str, quantity: str, role: str | None = None) -> dict[str, sympy.Expr]:
    """Whole-model quantity per block template (bound dims, runtime symbols kept)."""
    w = analysis.walks[phase]
    out: dict[str, sympy.Expr] = {}
    for res in w.results.values():
        if res.node.stack != "decoder" or (role is not None and res.node.role != role):
            continue
        caches = sum((f.expr() for f in res.caches), sympy.Integer(0))
        expr = res.flops if quantity == "flops" else caches
        count = node_count(w, res, symbolic=False)[0]
        out[res.node.template] = sympy.expand(out.get(res.node.template, 0) + w.bind(expr) * count)
    return out


def _schedule(analysis) -> dict[int, str]:
    return {r["layer"]: r["template"] for r in analysis.tables["layer_schedule"].to_pylist() if r["stack"] == "decoder"}


def _brute_chunk_pairs(s: int, c: int, chunk: int) -> int:
    return sum((j - 1) % chunk + 1 for j in range(c - s + 1, c + 1))


# --------------------------------------------------------------------------- gpt-oss


def test_gpt_oss_sliding_layers_stop_at_the_window_while_full_layers_grow():
    """gpt-oss-20b: 24 layers, layer_types sliding/full alternating from layer 0; per layer and
    token K and V of 8 KV heads × head_dim 64 = 1024 elements.  Sliding layers keep
    min(c, 128) positions, full layers c."""
    cfg = _config("openai__gpt-oss-20b.json")
    window, per_token = cfg["sliding_window"], 2 * cfg["num_key_value_heads"] * cfg["head_dim"]
    assert (window, per_token) == (128, 1024)
    a = evaluate("gpt-oss-20b")
    schedule = _schedule(a)
    assert [schedule[i] for i in range(4)] == ["sliding", "full", "sliding", "full"]
    assert [schedule[i] for i in range(24)] == [
        {"sliding_attention": "sliding", "full_attention": "full"}[t] for t in cfg["layer_types"]
    ]
    cache = _by_template(a, "decode", "cache")
    for c in (1, 100, 128, 129, 5000, 131_072):
        at = {t: e.xreplace({B: 1, C: c}) for t, e in cache.items()}
        assert at["sliding"] == 12 * per_token * min(c, window)
        assert at["full"] == 12 * per_token * c
    # the same through the views, at the stored 8K decode workload
    caches = {(r["uid"].split("/")[1], r["kind"]): (r["growth"], r["window"]) for r in a.tables["caches"].to_pylist()}
    assert caches[("sliding", "key")] == ("window", 128) and caches[("full", "key")] == ("window", 0)


def test_gpt_oss_kv_by_layer_group_view(catalog_db):
    con = connect(catalog_db)
    rows = con.execute(
        "select template, sum(elements) from kv_by_layer_group "
        "where model = 'gpt-oss-20b' and workload = 'decode_b1_c8k' and dtype = 'bf16' group by template"
    ).fetchall()
    assert dict(rows) == {"sliding": 12 * 1024 * 128, "full": 12 * 1024 * 8192}


def test_gpt_oss_sinks_and_stacked_experts():
    """One sink logit per head, named self_attn.sinks; the softmax normalizes over the
    attended keys plus the sink: decode (s = 1) 5·B·heads·(min(c, 128) + 1) FLOPs on a
    sliding layer, 5·B·heads·(c + 1) on a full one.  Experts are stacked parameters
    (experts.gate_up_proj [experts, 2·d_ff, d], with gate_up_proj_bias)."""
    cfg = _config("openai__gpt-oss-20b.json")
    heads, experts = cfg["num_attention_heads"], cfg["num_local_experts"]
    a = evaluate("gpt-oss-20b")
    w = a.walks["decode"]
    probs = {t: w.bind(w.results[f"decoder/{t}/self_attn.probs"].flops).xreplace({S: 1}) for t in ("sliding", "full")}
    assert sympy.expand(probs["sliding"] - 5 * B * heads * (sympy.Min(C, 128) + 1)) == 0
    assert sympy.expand(probs["full"] - 5 * B * heads * (C + 1)) == 0
    weights = {(r["uid"], r["tensor"]): r for r in a.tables["weights"].to_pylist()}
    sinks = weights[("decoder/full/self_attn.probs", "sinks")]
    assert (sinks["name"], sinks["shape"]) == ("model.layers.{layer}.self_attn.sinks", [heads])
    gate_up = weights[("decoder/full/mlp.gate_up_proj", "weight")]
    bias = weights[("decoder/full/mlp.gate_up_proj", "bias")]
    assert gate_up["name"] == "model.layers.{layer}.mlp.experts.gate_up_proj"
    assert gate_up["shape"] == [2 * cfg["intermediate_size"], cfg["hidden_size"]]
    assert bias["name"] == "model.layers.{layer}.mlp.experts.gate_up_proj_bias"
    counts = {r["uid"]: (r["count"], r["active_count"]) for r in a.tables["instances"].to_pylist()}
    assert counts["decoder/full/mlp.gate_up_proj"] == (12 * experts, 12 * cfg["num_experts_per_tok"])


# --------------------------------------------------------------------------- Gemma-2


def test_gemma2_alternates_sliding_and_global_layers():
    """Even layers slide over 4096 keys, odd layers attend everything.  One prefill of
    s = c = 10,000 tokens: a layer's attention differs between the two templates only in
    score + apply (4·heads·head_dim per pair), soft-cap (3·heads) and softmax (5·heads) over
    the pairs the window removes: s(s+1)/2 − Σ_{j ≤ s} min(j, 4096)."""
    cfg = _config("google__gemma-2-9b-it.json")
    window, heads, head_dim = cfg["sliding_window"], cfg["num_attention_heads"], cfg["head_dim"]
    a = evaluate("gemma-2-9b-it")
    schedule = _schedule(a)
    assert {i for i, t in schedule.items() if t == "sliding"} == set(range(0, 42, 2))
    assert {i for i, t in schedule.items() if t == "global"} == set(range(1, 42, 2))
    caches = {(r["uid"].split("/")[1], r["kind"]): (r["growth"], r["window"]) for r in a.tables["caches"].to_pylist()}
    assert caches[("sliding", "value")] == ("window", window) and caches[("global", "value")] == ("window", 0)
    s = 10_000
    attention = {
        t: e.xreplace({B: 1, S: s, C: s}) / 21 for t, e in _by_template(a, "prefill", "flops", "attention").items()
    }
    removed = s * (s + 1) // 2 - sum(min(j, window) for j in range(1, s + 1))
    assert attention["global"] - attention["sliding"] == (4 * heads * head_dim + 8 * heads) * removed


def test_gemma2_params_embedding_scale_and_logit_softcap():
    """Parameters by hand: embedding V·d (lm_head tied) + 42 layers × (q, k, v, o:
    d·h·hd + 2·d·kv·hd + h·hd·d; MLP 3·d·ff; four norms 4·d) + final norm d = 9,241,705,984.
    The scaled embedding costs one multiply per element (B·s·d), the final soft-cap 3 FLOPs
    per sampled logit (prefill: one position per request, 3·B·V)."""
    cfg = _config("google__gemma-2-9b-it.json")
    d, vocab, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    h, kv, hd, ff = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["intermediate_size"]
    per_layer = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * ff + 4 * d
    assert vocab * d + layers * per_layer + d == 9_241_705_984
    a = evaluate("gemma-2-9b-it")
    counts = {r["uid"]: r["count"] for r in a.tables["instances"].to_pylist()}
    assert sum(r["elements"] * counts[r["uid"]] for r in a.tables["weights"].to_pylist()) == 9_241_705_984
    assert not [r for r in a.tables["weights"].to_pylist() if r["uid"] == "lm_head"]  # tied
    w = a.walks["prefill"]
    assert w.bind(w.results["embed_tokens"].flops) == B * S * d
    assert w.bind(w.results["logits_softcap"].flops) == 3 * B * vocab


# --------------------------------------------------------------------------- Llama-4


def test_chunk_pairs_by_hand():
    """C = 8192, a fresh prefill of 20,000 tokens: two full chunks (C(C+1)/2 pairs each) and
    3,616 queries of the third chunk; decode right after a boundary sees one key."""
    assert chunk_pairs_int(20_000, 20_000, 8192) == 2 * 8192 * 8193 // 2 + 3616 * 3617 // 2
    assert chunk_pairs_int(20_000, 20_000, 8192) == _brute_chunk_pairs(20_000, 20_000, 8192)
    assert chunk_pairs_int(1, 8193, 8192) == chunk_len_int(8193, 8192) == 1
    assert chunk_pairs_int(1, 8192, 8192) == chunk_len_int(8192, 8192) == 8192
    # 100 queries at 8143..8242: 50 at the end of the first chunk, 50 opening the second
    assert chunk_pairs_int(100, 8242, 8192) == sum(range(8143, 8193)) + sum(range(1, 51))


def test_llama4_scout_chunked_cache_and_pairs():
    """Scout: 48 layers, NoPE global attention at 3, 7, …, 47 (12 layers), chunked elsewhere
    (36 layers); 8 KV heads × head_dim 128.  Cache per request at context c: chunked layers
    36 · 2048 · ((c − 1) mod 8192 + 1), global layers 12 · 2048 · c.  Score FLOPs of one
    chunked layer in a prefill of s tokens: 2 · heads · head_dim · chunk_pairs."""
    cfg = _config("meta-llama__Llama-4-Scout-17B-16E-Instruct.json")["text_config"]
    chunk, heads, head_dim = cfg["attention_chunk_size"], cfg["num_attention_heads"], cfg["head_dim"]
    per_token = 2 * cfg["num_key_value_heads"] * head_dim
    a = evaluate("Llama-4-Scout-17B-16E-Instruct")
    schedule = _schedule(a)
    assert {i for i, t in schedule.items() if t == "global"} == {i for i in range(48) if (i + 1) % 4 == 0}
    assert sum(t == "chunked" for t in schedule.values()) == 36
    cache = _by_template(a, "decode", "cache")
    for c in (1, 5000, 8192, 8193, 20_000, 131_072):
        at = {t: e.xreplace({B: 1, C: c}) for t, e in cache.items()}
        assert at["chunked"] == 36 * per_token * ((c - 1) % chunk + 1)
        assert at["global"] == 12 * per_token * c
    assert cache["chunked"].xreplace({B: 1, C: 8193}) == 36 * per_token  # a new chunk starts empty but for itself
    w = a.walks["prefill"]
    scores = w.bind(w.results["decoder/chunked/self_attn.scores"].flops)
    for s, c in ((20_000, 20_000), (100, 8292), (4096, 30_000)):
        got = scores.xreplace({B: 1, S: s, C: c})
        assert got == 2 * heads * head_dim * _brute_chunk_pairs(s, c, chunk)
    decode = a.walks["decode"]
    factors = {
        (r["quantity"], r["factor"], r["factor_arg"])
        for r in a.tables["terms"].to_pylist()
        if r["phase"] == "decode" and r["uid"].startswith("decoder/chunked/self_attn.")
    }
    assert ("flops", "chunk_pairs", chunk) in factors and ("cache_elements", "chunk_len", chunk) in factors
    score = decode.bind(decode.results["decoder/chunked/self_attn.scores"].flops)
    assert score.xreplace({S: 1}) == 2 * B * heads * head_dim * chunk_len(C, chunk)
    assert score.xreplace({B: 1, S: 1, C: 8193}) == 2 * heads * head_dim  # a new chunk: the query sees itself


def test_llama4_maverick_interleaves_dense_and_moe():
    """interleave_moe_layer_step 2: MoE on odd layers (moe_layers = range(1, 48, 2)), a dense
    SwiGLU of intermediate_size_mlp on even ones; NoPE global layers (3::4) are all odd."""
    cfg = _config("meta-llama__Llama-4-Maverick-17B-128E-Instruct.json")["text_config"]
    a = evaluate("Llama-4-Maverick-17B-128E-Instruct")
    schedule = _schedule(a)
    moe = {i for i, t in schedule.items() if t.endswith("_moe")}
    assert moe == set(range(cfg["interleave_moe_layer_step"] - 1, 48, cfg["interleave_moe_layer_step"]))
    assert {i for i, t in schedule.items() if t.startswith("global")} == set(range(3, 48, 4))
    shapes = {r["name"]: r["shape"] for r in a.tables["weights"].to_pylist()}
    d = cfg["hidden_size"]
    assert shapes["language_model.model.layers.{layer}.feed_forward.gate_proj.weight"] == [
        cfg["intermediate_size_mlp"],
        d,
    ]
    # stacked experts, stored [experts, in, out] (Llama4TextExperts applies bmm(x, W))
    assert shapes["language_model.model.layers.{layer}.feed_forward.experts.gate_up_proj"] == [
        d,
        2 * cfg["intermediate_size"],
    ]


def test_chunked_attention_needs_a_chunked_cache(tmp_path):
    """The axiom: attention over chunks with K/V caches that keep every position is rejected
    at the cache declaration, with the spelling that fixes it."""
    components, models = tmp_path / "components", tmp_path / "models"
    components.mkdir()
    models.mkdir()
    text = (COMPONENTS_DIR / "gqa_attention_chunked.yaml").read_text()
    old = "    - { node: k_rope,  kind: key,   growth: chunk, chunk: attn_chunk }"
    assert text.count(old) == 1
    (components / "gqa_attention_chunked.yaml").write_text(text.replace(old, "    - { node: k_rope,  kind: key }"))
    model = Path(__file__).parents[1] / "archsql" / "specs" / "models"
    for name in ("Llama-4-Scout-17B-16E-Instruct", "Llama-4-Maverick-17B-128E-Instruct"):
        (models / f"{name}.yaml").write_text((model / f"{name}.yaml").read_text())
    library = load_library(components_dir=components, models_dir=models)
    with pytest.raises(ShapeError) as info:
        evaluate(models / "Llama-4-Maverick-17B-128E-Instruct.yaml", library=library)
    issues = [i for i in info.value.issues if "chunk" in i.message]
    assert len(issues) == 2  # the chunked_dense and chunked_moe templates both use the component
    for issue in issues:
        assert issue.file == str(components / "gqa_attention_chunked.yaml") and issue.line is not None
        assert "attends chunks of 8192 positions" in issue.message and "key cache 'k_rope'" in issue.message
        assert "growth: chunk, chunk:" in issue.hint


def test_chunked_formulas_print_sql_equal_to_their_term_rows():
    """The SQL printed for chunk_pairs / chunk_len terms, run by DuckDB with its macros,
    equals the term rows evaluated in Python."""
    from archsql.views import create_macros

    a = evaluate("Llama-4-Scout-17B-16E-Instruct")
    terms = a.tables["terms"].to_pylist()
    con = duckdb.connect()
    create_macros(con)
    checked = 0
    for f in a.tables["formulas"].to_pylist():
        if "chunk" not in f["sql"]:
            continue
        rows = [
            (t["coef"], t["e_B"], t["e_s"], t["e_c"], t["factor"], t["factor_arg"])
            for t in terms
            if (t["uid"], t["phase"], t["quantity"]) == (f["uid"], f["phase"], f["quantity"])
        ]
        for batch, s, c in ((3, 17, 4099), (1, 1, 8193), (2, 5000, 20_000)):
            (got,) = con.execute(
                f"select {f['sql']} from (select {batch}::BIGINT as batch, {s}::BIGINT as new_tokens, "
                f"{c}::BIGINT as context)"
            ).fetchone()
            assert got == pytest.approx(evaluate_terms(rows, batch, s, c), rel=1e-12), f["uid"]
            checked += 1
    assert checked >= 30


# --------------------------------------------------------------------------- GLM-4.7


def test_glm47_partial_rope_and_mtp_layer():
    """RoPE on head_dim × partial_rotary_factor = 64 of 128 features: a query rope costs
    3·B·s·heads·64.  One MTP layer (num_nextn_predict_layers) at checkpoint index 92, after
    the 92 decoder layers; KV per token 92 · 2 · 8 · 128 for the base model."""
    cfg = _config("zai-org__GLM-4.7.json")
    rot = int(cfg["head_dim"] * cfg["partial_rotary_factor"])
    a = evaluate("GLM-4.7")
    w = a.walks["prefill"]
    assert rot == 64
    assert w.bind(w.results["decoder/moe/self_attn.q_rope"].flops) == 3 * B * S * cfg["num_attention_heads"] * rot
    stacks = {(r["stack"], r["role"], r["layers"], r["first_layer"]) for r in a.tables["stacks"].to_pylist()}
    assert stacks == {("decoder", "decoder", 92, 0), ("mtp", "mtp", 1, 92)}
    counts = {r["uid"]: r["count"] for r in a.tables["instances"].to_pylist()}
    per_token = sum(
        r["elements"] * counts[r["uid"]] for r in a.tables["caches"].to_pylist() if r["uid"].startswith("decoder/")
    )
    assert per_token == cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * cfg["head_dim"]
