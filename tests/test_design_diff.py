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


def test_mla_vs_dsa_is_the_indexer_path_and_the_index_cache():
    d = diff("mla_attention", "mla_dsa_attention")
    assert d.kind == "component" and d.table.schema == DIFF_SCHEMA
    assert d.paths("only_a") == []
    assert set(d.paths("only_b")) == INDEXER | {"$.cache.index_k_rope:index_key"}
    assert set(d.paths("changed")) == {"$", "scores", "probs", "attn"}
    changed = {(r["path"], r["attribute"]): (r["a_value"], r["b_value"]) for r in d.rows("changed")}
    assert changed[("scores", "op")] == ("attention_score", "sparse_attention_score")
    assert changed[("scores", "in")] == ("query, key", "query, key, index_topk")
    assert changed[("scores", "dims.topk")] == (None, "index_topk")
    assert changed[("$", "decode_variant")] == ("mla_attention_absorbed", "mla_dsa_attention_absorbed")
    cache = next(r for r in d.rows("only_b") if r["path"] == "index_k_rope")
    assert "cache=mla.index_key: per_token" in cache["b_value"]


def test_decode_phase_diffs_the_decode_variants():
    d = diff("mla_attention", "mla_dsa_attention", phase="decode")
    assert (d.a, d.b) == ("mla_attention_absorbed", "mla_dsa_attention_absorbed")
    assert "index_k_rope" in d.paths("only_b")


def test_identical_components_have_no_rows():
    assert diff("gqa_attention", "gqa_attention").table.num_rows == 0


def test_model_diff_pairs_declaration_paths():
    d = diff("DeepSeek-V3", "DeepSeek-V3.2")
    only_b = d.paths("only_b")
    # the same leaf name in three layer groups is three nodes
    for prefix in ("decoder/dense/self_attn.", "decoder/moe/self_attn.", "mtp/mtp/layer.self_attn."):
        assert {p.removeprefix(prefix) for p in only_b if p.startswith(prefix)} == INDEXER
    assert {p for p in only_b if p.startswith("$.dims.")} == {
        "$.dims.n_index_heads",
        "$.dims.d_index_head",
        "$.dims.index_topk",
    }
    assert d.paths("only_a") == []
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
    assert "only in B: 11" in result.output and "index_wq_b" in result.output
    out = tmp_path / "diff.parquet"
    result = CliRunner().invoke(cli, ["diff", "DeepSeek-V3", "DeepSeek-V3.2", "--format", "parquet", "-o", str(out)])
    assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.schema.names == DIFF_SCHEMA.names and table.num_rows > 100
    result = CliRunner().invoke(cli, ["diff", "DeepSeek-V3", "DeepSeek-V3.2", "--max-rows", "10"])
    assert result.exit_code == 0 and "72 paths, e.g." in result.output and "more rows" in result.output
