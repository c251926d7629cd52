"""Layout propagation: sharding states follow the DimMap; collectives are inferred."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsql.evaluator import evaluate
from archsql.evaluator.layouts import Layout, parse_layout
from archsql.schema.expr import RUNTIME_SYMBOLS

B, S = RUNTIME_SYMBOLS["B"], RUNTIME_SYMBOLS["s"]


def _rows(table, **where):
    return [r for r in table.to_pylist() if all(r[k] == v for k, v in where.items())]


def test_tensor_parallel_llama_layer_has_exactly_two_all_reduces():
    """Nobody wrote them: o_proj and down_proj are row-split (their input features are
    sharded), so their outputs are pending sums, and the residual adds need whole values —
    one all-reduce of B·s·d_model elements after attention, one after the MLP, per layer."""
    a = evaluate("Meta-Llama-3.1-8B")
    for phase in ("prefill", "decode"):
        # the tensor-parallel ones (context parallel adds its own over cp groups: test_parallel_mesh.py)
        colls = [c for c in _rows(a.tables["collectives"], phase=phase) if not c["group"].startswith("cp")]
        # issue 12 item 5: the vocab-parallel embedding and lm_head add one reduction of the
        # lookup and one gather of the logits, once per step outside the layers
        # (tests/test_vocab_and_expert_tp.py); the layers keep exactly two
        vocab = [c for c in colls if not c["consumer_uid"].startswith("decoder/")]
        assert sorted((c["consumer_uid"], c["kind"], c["port"]) for c in vocab) == [
            ("embed_tokens", "all_reduce", -1),
            ("lm_head", "all_gather", -1),
        ]
        colls = [c for c in colls if c not in vocab]
        assert sorted((c["consumer_uid"], c["kind"], c["group"]) for c in colls) == [
            ("decoder/dense/attn_residual", "all_reduce", "attention"),
            ("decoder/dense/ffn_residual", "all_reduce", "ffn"),
        ]
        for c in colls:
            terms = _rows(a.tables["terms"], phase=phase, uid=c["uid"], quantity="comm_elements")
            assert [(t["coef"], t["e_B"], t["e_s"], t["e_c"]) for t in terms] == [(4096.0, 1, 1, 0)]  # d_model · B · s
            (inst,) = _rows(a.tables["instances"], uid=c["uid"])
            assert inst["count"] == 32  # once per layer


def test_heads_are_sharded_and_o_proj_output_is_partial():
    a = evaluate("Meta-Llama-3.1-8B")
    lay = {
        (r["uid"], r["tensor"], r["axis"]): (r["placement"], r["group"])
        for r in _rows(a.tables["layouts"], phase="prefill")
    }
    assert lay[("decoder/dense/self_attn.q_heads", "out", 2)] == ("S", "attention")  # [B, s, heads, d]: heads
    assert lay[("decoder/dense/self_attn.scores", "out", 1)] == ("S", "attention")  # [B, heads, s, c]
    assert lay[("decoder/dense/self_attn.o_proj", "out", -1)] == ("P", "attention")
    assert lay[("decoder/dense/self_attn.o_proj", "weight", 1)] == ("S", "attention")  # row-split
    assert ("decoder/dense/attn_residual", "out", -1) not in lay  # reduced before the add
    assert lay[("embed_tokens", "out", 0)] == ("S", "dp")  # requests split over data-parallel ranks


def test_mla_latent_cache_is_not_split_by_tensor_parallelism():
    """The MLA latent has no head axis, so attention TP cannot shard it: every TP rank holds
    the whole latent (only data parallelism over requests divides it — and context
    parallelism over its cached positions, axis 1)."""
    a = evaluate("DeepSeek-V3")
    lay = _rows(a.tables["layouts"], phase="decode", uid="decoder/moe/self_attn.kv_a_layernorm", tensor="out")
    assert [(r["axis"], r["group"]) for r in lay] == [(0, "dp"), (1, "cp")]
    q = _rows(a.tables["layouts"], phase="decode", uid="decoder/moe/self_attn.q_heads", tensor="out")
    assert {(r["axis"], r["group"]) for r in q} == {(0, "dp"), (2, "attention")}


def test_routed_experts_are_spread_over_expert_parallelism_with_all_to_all():
    a = evaluate("Qwen3-30B-A3B")
    copies = _rows(a.tables["layouts"], phase="prefill", tensor="copies")
    assert {r["uid"].rsplit(".", 1)[1] for r in copies} == {"gate_proj", "up_proj", "down_proj"}
    assert {r["group"] for r in copies} == {"moe_ep"}
    kinds = {
        (re.split(r"[./]", c["consumer_uid"])[-1], c["kind"], c["group"])
        for c in _rows(a.tables["collectives"], phase="prefill")
    }
    assert ("dispatch", "all_to_all", "moe_ep") in kinds and ("combine", "all_to_all", "moe_ep") in kinds
    # experts see every data-parallel rank's tokens after the dispatch
    dispatched = _rows(a.tables["layouts"], phase="prefill", uid="decoder/dense/mlp.dispatch", tensor="out")
    assert all(r["group"] != "dp" for r in dispatched)


@given(
    st.lists(st.one_of(st.none(), st.sampled_from(["attention", "ffn", "moe_ep", "dp"])), min_size=1, max_size=5),
    st.frozensets(st.sampled_from(["attention", "ffn", "moe_tp"])),
)
def test_layout_text_round_trips(axes, partial):
    lay = Layout(tuple((i, g) for i, g in enumerate(axes) if g), frozenset(partial))
    assert parse_layout(lay.text(len(axes))) == lay


def test_layout_text_form():
    assert Layout(((0, "dp"), (2, "attention")), frozenset({"ffn"})).text(3) == "[S(dp), R, S(attention)] P(sum: ffn)"
    with pytest.raises(ValueError):
        parse_layout("[S(dp), Q]")
