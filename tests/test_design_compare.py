"""Component comparison: probes of GQA / MLA / DSA / sliding / gated DeltaNet / Mamba2 under one
contract, checked against the origin configs (independent derivations, not the engine)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.design.compare import ComponentRef, compare_components
from archsql.errors import DesignError, SpecError
from archsql.specs import CONFIGS_DIR

D_MODEL = 2048  # the contract: not the d_model of any origin model
CONTEXTS = (2048, 32768, 131072)
BF16 = 2
REFS = [
    "gqa_attention@Meta-Llama-3.1-8B",
    "mla_attention@DeepSeek-V3",
    "mla_dsa_attention@DeepSeek-V3.2",
    "gqa_attention@Mistral-7B-Instruct-v0.1",
    "gated_deltanet@Qwen3.5-27B",
    "mamba2_mixer@Nemotron-H-56B-Base-8K",
]


def config(name: str) -> dict:
    return json.loads((CONFIGS_DIR / name).read_text())


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return compare_components("attention", REFS, d_model=D_MODEL, contexts="2k,32k,128k", db=root / "design.duckdb")


def rows_of(comparison, label: str) -> dict[int, dict]:
    probe = next(p for p in comparison.probes if p.ref.label == label)
    return {r["context"]: r for r in comparison.table.to_pylist() if r["model"] == probe.model}


def test_one_row_per_component_and_context(comparison):
    rows = comparison.table.to_pylist()
    assert len(rows) == len(REFS) * len(CONTEXTS)
    assert {r["context"] for r in rows} == set(CONTEXTS)
    assert {r["d_model"] for r in rows} == {D_MODEL}
    assert {r["gpu"] for r in rows} == {"H200 SXM"}
    assert all(r["prefill_time_s"] > 0 and r["decode_time_s"] > 0 and r["prefill_flops"] > 0 for r in rows)


def test_gqa_params_use_the_contract_width_and_the_origin_heads(comparison):
    c = config("meta-llama__Meta-Llama-3.1-8B.json")
    head = c["hidden_size"] // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * head, c["num_key_value_heads"] * head
    expected = D_MODEL * q + 2 * D_MODEL * kv + q * D_MODEL  # q, k, v, o projections, no biases
    for row in rows_of(comparison, REFS[0]).values():
        assert row["params_per_layer"] == expected
        assert row["weight_bytes_per_layer"] == expected * BF16


def test_full_attention_cache_grows_per_token(comparison):
    c = config("meta-llama__Meta-Llama-3.1-8B.json")
    per_token = 2 * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * BF16
    for ctx, row in rows_of(comparison, REFS[0]).items():
        assert row["cache_growth"] == "per_token"
        assert row["cache_bytes_per_request"] == per_token * ctx


def test_sliding_window_cache_is_capped(comparison):
    c = config("mistralai__Mistral-7B-Instruct-v0.1.json")
    per_token = 2 * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * BF16
    rows = rows_of(comparison, REFS[3])
    for ctx, row in rows.items():
        assert row["cache_growth"] == f"window:{c['sliding_window']}"
        assert row["cache_bytes_per_request"] == per_token * min(ctx, c["sliding_window"])
    assert rows[32768]["cache_bytes_per_request"] == rows[131072]["cache_bytes_per_request"]  # flat past the window
    full = rows_of(comparison, REFS[0])
    assert rows[2048]["prefill_flops"] == full[2048]["prefill_flops"]  # the window does not bite below it
    assert rows[131072]["prefill_flops"] < full[131072]["prefill_flops"]


def test_mla_and_dsa_caches(comparison):
    v3, v32 = config("deepseek-ai__DeepSeek-V3.json"), config("deepseek-ai__DeepSeek-V3.2.json")
    mla = (v3["kv_lora_rank"] + v3["qk_rope_head_dim"]) * BF16
    # the index key is stored FP8 + one FP32 scale per 128 whatever the kv dtype (docs/pricing.md)
    index_key = v32["index_head_dim"] * 1 + v32["index_head_dim"] // 128 * 4
    dsa = (v32["kv_lora_rank"] + v32["qk_rope_head_dim"]) * BF16 + index_key
    for (ctx, a), b in zip(rows_of(comparison, REFS[1]).items(), rows_of(comparison, REFS[2]).values(), strict=True):
        assert a["cache_bytes_per_request"] == mla * ctx
        assert b["cache_bytes_per_request"] == dsa * ctx
    indexer = (
        v32["q_lora_rank"] * v32["index_n_heads"] * v32["index_head_dim"]  # wq_b
        + D_MODEL * v32["index_head_dim"]  # wk
        + 2 * v32["index_head_dim"]  # k_norm (LayerNorm weight and bias)
        + D_MODEL * v32["index_n_heads"]  # weights_proj
    )
    a, b = rows_of(comparison, REFS[1])[2048], rows_of(comparison, REFS[2])[2048]
    assert b["params_per_layer"] - a["params_per_layer"] == indexer


def test_recurrent_state_is_flat(comparison):
    q = config("Qwen__Qwen3.5-27B.json")["text_config"]
    conv_channels = 2 * q["linear_num_key_heads"] * q["linear_key_head_dim"]
    conv_channels += q["linear_num_value_heads"] * q["linear_value_head_dim"]
    # conv states in the act dtype (BF16 here), recurrent / SSM states in FP32 (4 B)
    delta = conv_channels * (q["linear_conv_kernel_dim"] - 1) * BF16
    delta += q["linear_num_value_heads"] * q["linear_key_head_dim"] * q["linear_value_head_dim"] * 4
    n = config("nvidia__Nemotron-H-56B-Base-8K.json")
    xbc = n["mamba_num_heads"] * n["mamba_head_dim"] + 2 * n["n_groups"] * n["ssm_state_size"]
    mamba = xbc * (n["conv_kernel"] - 1) * BF16
    mamba += n["mamba_num_heads"] * n["mamba_head_dim"] * n["ssm_state_size"] * 4
    for label, state_bytes in ((REFS[4], delta), (REFS[5], mamba)):
        rows = rows_of(comparison, label)
        assert {r["cache_bytes_per_request"] for r in rows.values()} == {state_bytes}
        assert {r["cache_growth"] for r in rows.values()} == {"state"}
        assert {r["cache_bytes_per_token"] for r in rows.values()} == {0}


def test_probe_is_a_model_spec_loadable_by_the_library(comparison):
    from archsql.evaluator import evaluate

    probe = comparison.probes[1]
    assert probe.origin_template == "dense" and probe.role == "attention"
    text = probe.spec_file.read_text()
    assert "d_model: 2048" in text and "config.kv_lora_rank" in text
    assert evaluate(probe.spec_file).model == probe.model


def test_comparison_is_a_view_in_the_store(comparison):
    from archsql.api import query

    table = query(
        "select component, max(cache_bytes_per_request) as peak from component_comparison group by component",
        db=comparison.db,
    )
    assert set(table.column("component").to_pylist()) == {r.split("@")[0] for r in REFS}


def test_reference_dims_and_template():
    ref = ComponentRef.parse("gqa_attention@Meta-Llama-3.1-8B:dense[window=4096,n_kv_heads=4]")
    assert (ref.component, ref.origin, ref.template) == ("gqa_attention", "Meta-Llama-3.1-8B", "dense")
    assert dict(ref.dims) == {"window": 4096, "n_kv_heads": 4}
    with pytest.raises(DesignError, match="NAME@MODEL"):
        ComponentRef.parse("gqa_attention")


def test_probe_dims_override(tmp_path):
    c = compare_components(
        "attention",
        ["gqa_attention@Meta-Llama-3.1-8B[n_kv_heads=4]", "gqa_attention@Meta-Llama-3.1-8B"],
        d_model=4096,
        contexts="4k",
        db=tmp_path / "d.duckdb",
    )
    four, eight = (r["cache_bytes_per_request"] for r in c.table.to_pylist())
    assert four * 2 == eight


# ---------------------------------------------------------------------------- bad input


def test_unknown_component(tmp_path):
    with pytest.raises(DesignError, match="unknown component 'gqa_atention'") as exc:
        compare_components("attention", ["gqa_atention@Meta-Llama-3.1-8B"], d_model=64, db=tmp_path / "d.duckdb")
    assert "did you mean 'gqa_attention'" in str(exc.value)


def test_component_of_another_role(tmp_path):
    with pytest.raises(DesignError, match=r"(?s)role 'ffn'.*slot 'attention'") as exc:
        compare_components("attention", ["swiglu_mlp@Meta-Llama-3.1-8B"], d_model=64, db=tmp_path / "d.duckdb")
    assert "pre_norm_block.yaml" in str(exc.value)


def test_unknown_slot(tmp_path):
    with pytest.raises(DesignError, match=r"(?s)unknown slot 'atention'.*did you mean 'attention'"):
        compare_components("atention", REFS[:1], d_model=64, db=tmp_path / "d.duckdb")


def test_unknown_origin_model(tmp_path):
    with pytest.raises(SpecError, match=r"unknown model 'Llama-3\.1-8B'"):
        compare_components("attention", ["gqa_attention@Llama-3.1-8B"], d_model=64, db=tmp_path / "d.duckdb")


def test_missing_dims_name_each_dim_and_where_to_bind(tmp_path):
    """DeepSeek-V3 binds no GQA dims: every one is listed, none defaulted, no probe left behind."""
    with pytest.raises(DesignError) as exc:
        compare_components("attention", ["gqa_attention@DeepSeek-V3"], d_model=64, db=tmp_path / "d.duckdb")
    text = str(exc.value)
    for dim in ("d_head", "n_kv_heads", "o_bias", "qkv_bias", "window"):
        assert f"dim '{dim}'" in text
    assert "DeepSeek-V3.yaml" in text and "gqa_attention.yaml" in text
    assert "gqa_attention@DeepSeek-V3[window=<value>]" in text
    assert not list((tmp_path / "d.specs").glob("*.yaml"))


def test_unknown_gpu_and_dim(tmp_path):
    with pytest.raises(DesignError, match="unknown GPU 'H300'"):
        compare_components("attention", REFS[:1], d_model=64, gpu="H300", db=tmp_path / "d.duckdb")
    with pytest.raises(DesignError, match=r"unknown dim in .*: n_kv_head"):
        compare_components("attention", ["gqa_attention@Meta-Llama-3.1-8B[n_kv_head=4]"], d_model=64, db=tmp_path / "x")


# ---------------------------------------------------------------------------- CLI


def test_cli_compare_table_and_csv(tmp_path):
    args = ["compare", "attention", "-C", REFS[0], "-C", REFS[4], "--d-model", "1024", "--context", "1k,8k"]
    args += ["--store", str(tmp_path / "d.duckdb")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "gated_deltanet" in result.output and "cache/req 8k" in result.output
    result = CliRunner().invoke(cli, [*args, "--format", "csv"])
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[0].split(",")
    assert "cache_bytes_per_request" in header and len(result.output.splitlines()) == 1 + 2 * 2


def test_cli_compare_bad_input_is_one_message(tmp_path):
    result = CliRunner().invoke(
        cli, ["compare", "attention", "-C", "nope@Meta-Llama-3.1-8B", "--d-model", "64", "--store", str(tmp_path / "d")]
    )
    assert result.exit_code == 2 and "unknown component 'nope'" in result.output and "Traceback" not in result.output
