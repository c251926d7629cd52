"""Graph diff: nodes paired by declaration path; MLA vs DSA shows exactly the indexer and the
index cache; model diffs pair uids (stack/template/slot.node), not leaf names."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.design.diff import DIFF_SCHEMA, diff
from archsql.errors import DesignError

INDEXER = {
    "index_wq_b",
    "index_q_heads",
    "index_q_rope",
    "index_wk",
    "index_k_norm",
    "index_k",
    "index_k_rope",
    "index_weights",
    "index_scores",
    "index_topk",
}
ABSORBED = {"latent", "q_absorbed", "attn_latent"}  # MLA's absorbed-form nodes
EXPANDED = {"kv_b_proj", "kv_heads", "k_nope", "value"}  # MLA's expanded (naive) prefill nodes


def test_mla_vs_dsa_is_the_indexer_path_and_the_index_cache():
    """DSA runs MLA's absorbed form in both phases (the sparse kernels are MQA over the
    latent), so against absorbed MLA it adds exactly the indexer and its cache, makes the
    attention sparse, and holds kv_b_proj's stored weight on q_absorbed (no phase runs the
    expanded form that declares it in mla_attention)."""
    d = diff("mla_attention_absorbed", "mla_dsa_attention")
    assert d.kind == "component" and d.table.schema == DIFF_SCHEMA
    assert d.paths("only_a") == []
    assert set(d.paths("only_b")) == INDEXER | {"$.cache.index_k_rope:index_key"}
    assert set(d.paths("changed")) == {"q_absorbed", "scores", "probs", "attn_latent"}
    changed = {(r["path"], r["attribute"]): (r["a_value"], r["b_value"]) for r in d.rows("changed")}
    assert changed[("scores", "op")] == ("attention_score", "sparse_attention_score")
    assert changed[("scores", "in")] == ("query, key", "query, key, index_topk")
    assert changed[("scores", "dims.topk")] == (None, "index_topk")
    assert changed[("attn_latent", "op")] == ("attention_apply", "sparse_attention_apply")
    assert changed[("q_absorbed", "path")] == (None, "kv_b_proj")
    assert changed[("q_absorbed", "dims.holds")] == (None, "d_qk_nope + d_v_head")
    cache = next(r for r in d.rows("only_b") if r["path"] == "index_k_rope")
    assert "cache=mla.index_key: per_token" in cache["b_value"]


def test_prefill_diff_against_expanded_mla_shows_the_absorbed_form():
    """mla_attention prefills in the expanded form (kv_b_proj on the latents); DSA has no
    such form, so the prefill diff shows the expanded nodes gone and the absorbed ones in."""
    d = diff("mla_attention", "mla_dsa_attention")
    assert set(d.paths("only_a")) == EXPANDED
    assert set(d.paths("only_b")) == INDEXER | ABSORBED | {"$.cache.index_k_rope:index_key"}
    changed = {(r["path"], r["attribute"]): (r["a_value"], r["b_value"]) for r in d.rows("changed")}
    assert changed[("$", "decode_variant")] == ("mla_attention_absorbed", None)
    assert changed[("scores", "dims.kv_heads")] == ("n_heads", "1")


def test_decode_phase_diffs_the_decode_variants():
    d = diff("mla_attention", "mla_dsa_attention", phase="decode")
    assert (d.a, d.b) == ("mla_attention_absorbed", "mla_dsa_attention")
    assert "index_k_rope" in d.paths("only_b")


def test_identical_components_have_no_rows():
    assert diff("gqa_attention", "gqa_attention").table.num_rows == 0


def test_model_diff_pairs_declaration_paths():
    d = diff("DeepSeek-V3", "DeepSeek-V3.2")
    only_a, only_b = d.paths("only_a"), d.paths("only_b")
    # the same leaf name in three layer groups is three nodes; DSA prefills in MLA's absorbed
    # form, so V3's expanded prefill nodes are only in A and the absorbed ones only in B
    for prefix in ("decoder/dense/self_attn.", "decoder/moe/self_attn.", "mtp/mtp/layer.self_attn."):
        assert {p.removeprefix(prefix) for p in only_b if p.startswith(prefix)} == INDEXER | ABSORBED
        assert {p.removeprefix(prefix) for p in only_a if p.startswith(prefix)} == EXPANDED
    assert {p for p in only_b if p.startswith("$.dims.")} == {
        "$.dims.n_index_heads",
        "$.dims.d_index_head",
        "$.dims.index_topk",
    }
    assert len(only_a) == 3 * len(EXPANDED)
    fills = {r["path"]: r["b_value"] for r in d.rows("changed") if r["attribute"] == "fill.attention"}
    assert fills == {f"$.templates.{t}": "mla_dsa_attention" for t in ("dense", "moe", "mtp")}


def test_model_diff_shows_bound_sizes():
    d = diff("Qwen3-8B", "Qwen3-32B")
    assert d.paths("only_a") == d.paths("only_b") == []
    rows = {(r["path"], r["attribute"]): (r["a_value"], r["b_value"]) for r in d.rows("changed")}
    assert rows[("$.dims.d_model", "value")] == ("4096", "5120")
    assert rows[("$.stacks.decoder.schedule", "templates")] == ("dense×36", "dense×64")
    assert rows[("decoder/dense/mlp.up_proj", "weights")] == ("weight[12288, 4096]", "weight[25600, 5120]")
    assert rows[("decoder/dense/self_attn.q_proj", "copies")] == ("36", "64")


def test_bad_names():
    with pytest.raises(DesignError, match=r"(?s)'gqa_atention' is neither.*did you mean 'gqa_attention'"):
        diff("gqa_atention", "mla_attention")
    with pytest.raises(DesignError, match="cannot diff a component with a model"):
        diff("gqa_attention", "Meta-Llama-3.1-8B")


def test_cli_diff_table_and_rows(tmp_path):
    result = CliRunner().invoke(cli, ["diff", "mla_attention", "mla_dsa_attention"])
    assert result.exit_code == 0, result.output
    assert "only in B: 14" in result.output and "index_wq_b" in result.output
    out = tmp_path / "diff.parquet"
    result = CliRunner().invoke(cli, ["diff", "DeepSeek-V3", "DeepSeek-V3.2", "--format", "parquet", "-o", str(out)])
    assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.schema.names == DIFF_SCHEMA.names and table.num_rows > 100
    result = CliRunner().invoke(cli, ["diff", "DeepSeek-V3", "DeepSeek-V3.2", "--max-rows", "10"])
    assert result.exit_code == 0 and "60 paths, e.g." in result.output and "more rows" in result.output
