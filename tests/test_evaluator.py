"""Evaluator structure: templates × schedule, decode variants, streams/edges, weight_axes."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsql.errors import ShapeError
from archsql.evaluator import evaluate
from archsql.specs import COMPONENTS_DIR, CONFIGS_DIR, MODELS_DIR, load_library

LLAMA = (MODELS_DIR / "Meta-Llama-3.1-8B.yaml").read_text()


def _library(tmp_path: Path, components: dict[str, str] | None = None, models: dict[str, str] | None = None):
    cdir, mdir = tmp_path / "components", tmp_path / "models"
    cdir.mkdir(exist_ok=True)
    mdir.mkdir(exist_ok=True)
    for name, text in (components or {}).items():
        (cdir / f"{name}.yaml").write_text(text)
    for name, text in (models or {}).items():
        (mdir / f"{name}.yaml").write_text(text.replace("config: ", f"config: {CONFIGS_DIR}/", 1))
    return load_library(components_dir=cdir, models_dir=mdir), mdir


def test_two_templates_scheduled_by_layer(tmp_path):
    """First 3 layers dense, the rest MoE (DeepSeek-style first_k_dense), on Mixtral's config:
    each template is evaluated once and counted by the layers that use it."""
    spec = (MODELS_DIR / "Mixtral-8x7B-v0.1.yaml").read_text()
    spec = (
        spec.replace("model: Mixtral-8x7B-v0.1", "model: Hybrid")
        .replace("  d_ff: null\n", "  d_ff: config.intermediate_size\n")
        .replace("  mlp_bias: null\n", "  mlp_bias: 0\n")
    )
    spec += """templates:
  dense: { ffn: swiglu_mlp }
  moe: {}
stacks:
  decoder:
    repeat: n_layers
    path: model.layers
    streams: { hidden: { carries: true } }
    schedule:
      - { template: dense, layers: "0:3" }
      - { template: moe, layers: "3:" }
"""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "Meta-Llama-3.1-8B.yaml").write_text(LLAMA.replace("config: ", f"config: {CONFIGS_DIR}/", 1))
    library, mdir = _library(tmp_path, models={"Hybrid": spec.replace(f"config: {CONFIGS_DIR}/", "config: ")})
    a = evaluate(mdir / "Hybrid.yaml", library=library)
    sched = a.tables["layer_schedule"].to_pylist()
    assert [r["template"] for r in sched] == ["dense"] * 3 + ["moe"] * 29
    inst = {r["uid"]: r for r in a.tables["instances"].to_pylist()}
    assert inst["decoder/dense/mlp.gate_proj"]["count"] == 3
    assert inst["decoder/moe/mlp.gate_proj"]["count"] == 29 * 8  # 29 layers × 8 experts
    assert inst["decoder/moe/mlp.gate_proj"]["active_count"] == 29 * 2  # top-2
    # the carried stream enters dense layer 0 from the embedding, moe layer 3 from dense layer 2,
    # and every later moe layer from the previous moe layer
    edges = {
        (e["src_uid"], e["dst_uid"])
        for e in a.tables["edges"].to_pylist()
        if e["stream"] == "hidden" and e["phase"] == "prefill"
    }
    assert ("embed_tokens", "decoder/dense/input_layernorm") in edges
    assert ("decoder/dense/ffn_residual", "decoder/moe/input_layernorm") in edges
    assert ("decoder/moe/ffn_residual", "decoder/moe/input_layernorm") in edges
    assert ("decoder/moe/ffn_residual", "norm") in edges
    assert ("decoder/dense/ffn_residual", "norm") not in edges


def test_decode_variant_swaps_the_decode_program(tmp_path):
    """A component with decode_variant runs a different subgraph in decode; nodes are tagged
    by phase and shared nodes keep their uid."""
    base = (COMPONENTS_DIR / "gqa_attention.yaml").read_text()
    variant = base.replace("component: gqa_attention", "component: gqa_decode_variant")
    variant = variant.replace(
        "  merge:   { op: merge_heads, in: attn }",
        "  merge:   { op: merge_heads, in: attn }\n  extra:   { op: silu, in: merge }",
    ).replace('in: merge, dims: { in: "n_heads * d_head"', 'in: extra, dims: { in: "n_heads * d_head"')
    main = base.replace("component: gqa_attention", "component: gqa_with_variant").replace(
        "role: attention", "role: attention\ndecode_variant: gqa_decode_variant"
    )
    library, mdir = _library(
        tmp_path,
        components={"gqa_with_variant": main, "gqa_decode_variant": variant},
        models={
            "V": LLAMA.replace("attention: gqa_attention", "attention: gqa_with_variant").replace(
                "model: Meta-Llama-3.1-8B", "model: V"
            )
        },
    )
    a = evaluate(mdir / "V.yaml", library=library)
    # the spec's own nodes (inferred collectives, uid '…#kind[port]', differ by phase: context
    # parallelism adds its prefill and decode collectives)
    nodes = [n for n in a.tables["nodes"].to_pylist() if "#" not in n["uid"]]
    prefill = {n["uid"] for n in nodes if n["phase"] == "prefill"}
    decode = {n["uid"] for n in nodes if n["phase"] == "decode"}
    assert decode - prefill == {"decoder/dense/self_attn.extra"}
    assert prefill - decode == set()
    comps = {
        n["component"] for n in nodes if n["phase"] == "decode" and n["uid"].startswith("decoder/dense/self_attn.")
    }
    assert comps == {"gqa_decode_variant"}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "weight_axes: [{ world: attention, parts: n_heads }, { replicated: true }] }\n  k_proj",
            "weight_axes: [{ world: attention, parts: d_head }, { replicated: true }] }\n  k_proj",
            "dim 'd_head' may not be split by group 'attention'",
        ),
        (
            "weight_axes: [{ world: attention, parts: n_heads }, { replicated: true }] }\n  k_proj",
            "weight_axes: [{ world: attention, parts: n_heads }] }\n  k_proj",
            "weight_axes needs one entry per weight axis",
        ),
        (
            "weight_axes: [{ world: attention, parts: n_heads }, { replicated: true }] }\n  k_proj",
            "weight_axes: [{ world: atention, parts: n_heads }, { replicated: true }] }\n  k_proj",
            "did you mean 'attention'?",
        ),
    ],
)
def test_weight_axes_are_checked(tmp_path, old, new, message):
    base = (COMPONENTS_DIR / "gqa_attention.yaml").read_text()
    assert old in base
    broken = base.replace(old, new).replace("component: gqa_attention", "component: gqa_broken")
    library, mdir = _library(
        tmp_path,
        components={"gqa_broken": broken},
        models={
            "M": LLAMA.replace("attention: gqa_attention", "attention: gqa_broken").replace(
                "model: Meta-Llama-3.1-8B", "model: M"
            )
        },
    )
    with pytest.raises(ShapeError) as exc:
        evaluate(mdir / "M.yaml", library=library)
    text = str(exc.value)
    line = (
        broken.splitlines().index(next(x for x in broken.splitlines() if "q_proj:" in x)) + 2
    )  # weight_axes: is on the next line
    assert message in text
    assert f"gqa_broken.yaml:{line}:" in text
    assert "$.graph.q_proj.weight_axes" in text


def test_lm_head_samples_last_position_in_prefill_every_new_position_in_decode():
    from archsql.api import formula
    from archsql.schema.expr import RUNTIME_SYMBOLS

    s = RUNTIME_SYMBOLS["s"]
    _, prefill = formula("Meta-Llama-3.1-8B", "flops", "prefill", node="lm_head")
    _, decode = formula("Meta-Llama-3.1-8B", "flops", "decode", node="lm_head")
    per_position = 2 * 4096 * 128256  # 2 · d_model · vocab (config.json)
    assert prefill == per_position * RUNTIME_SYMBOLS["B"]
    assert decode == per_position * RUNTIME_SYMBOLS["B"] * s  # speculative decode verifies s tokens


def test_explain_node_matches_whole_path_segments():
    from archsql.api import explain
    from archsql.errors import QueryError

    q = explain("Meta-Llama-3.1-8B", "params", node="q_proj")
    assert q.value == 32 * 4096 * 4096
    with pytest.raises(QueryError, match="unknown node 'proj'"):
        explain("Meta-Llama-3.1-8B", "params", node="proj")
