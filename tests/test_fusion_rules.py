"""Fusion rules as data (issue 14, item 1): every shipped rule file loads and cites the
framework source each rule was read from; a broken file is a located error; the rules match
the structure the frameworks' model code fuses."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from archsql.errors import SpecError
from archsql.schema.fusion import parse_rule_file
from archsql.specs import FUSION_DIR

RULE = """
framework: vllm
versions: ">=0.11"
rules:
  - name: silu_and_mul
    pattern: { chain: [ { op: silu }, { op: mul, port: 0 } ] }
    kernel: silu_and_mul
    source: { file: vllm/model_executor/layers/activation.py, function: SiluAndMul.forward_cuda }
"""


def _write(tmp_path: Path, text: str, name: str = "vllm-0.11.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_shipped_rule_cites_its_source():
    files = sorted(FUSION_DIR.glob("*.yaml"))
    frameworks = {p.stem.partition("-")[0] for p in files}
    assert frameworks == {"vllm", "sglang"}
    # the current and the previous minor version of each framework
    assert all(len([p for p in files if p.stem.startswith(f + "-")]) >= 2 for f in frameworks)
    for path in files:
        rows = parse_rule_file(path)
        assert rows, path
        for row in rows:
            assert row["source_file"] and row["source_function"], (path, row["rule"])


def test_a_rule_without_its_source_is_a_located_error(tmp_path):
    text = RULE.replace(
        "    source: { file: vllm/model_executor/layers/activation.py, function: SiluAndMul.forward_cuda }\n", ""
    )
    with pytest.raises(SpecError) as info:
        parse_rule_file(_write(tmp_path, text))
    message = str(info.value)
    assert "missing required rule key 'source'" in message and "$.rules[0]" in message


def test_a_source_without_its_function_is_an_error(tmp_path):
    text = RULE.replace(", function: SiluAndMul.forward_cuda", "")
    with pytest.raises(SpecError, match="missing required source key 'function'"):
        parse_rule_file(_write(tmp_path, text))


def test_broken_patterns_and_names_are_located(tmp_path):
    three = RULE.replace("{ op: mul, port: 0 } ]", "{ op: mul, port: 0 }, { op: add } ]")
    with pytest.raises(SpecError, match=r"\$.rules\[0\].pattern.chain: a chain has two node patterns"):
        parse_rule_file(_write(tmp_path, three))
    typo = RULE.replace("{ op: silu }", "{ opp: silu }")
    with pytest.raises(SpecError) as info:
        parse_rule_file(_write(tmp_path, typo))
    assert "unknown node pattern key 'opp'" in str(info.value) and "did you mean 'op'" in str(info.value)
    with pytest.raises(SpecError, match=r"named <framework>-<version>\.yaml"):
        parse_rule_file(_write(tmp_path, RULE, name="sglang-0.5.yaml"))
    bad_phase = RULE.replace("    kernel: silu_and_mul\n", "    kernel: silu_and_mul\n    when: { phase: decoding }\n")
    with pytest.raises(SpecError, match="unknown phase"):
        parse_rule_file(_write(tmp_path, bad_phase))


def test_llama_matches_what_vllm_fuses(models_db):
    """Llama-3.1-8B in vLLM (vllm/model_executor/models/llama.py): LlamaAttention's
    qkv_proj is one QKVParallelLinear over q, k, v; LlamaMLP's gate_up_proj one
    MergedColumnParallelLinear followed by SiluAndMul; every RMSNorm after a residual add
    runs fused_add_rms_norm — post_attention_layernorm after the attention residual,
    the next layer's input_layernorm and the final norm after the FFN residual."""
    with duckdb.connect(str(models_db), read_only=True) as con:
        rows = con.execute(
            "select rule, members from fusion_matches where model = 'Meta-Llama-3.1-8B'"
            " and framework = 'vllm' and version = '0.11' and phase = 'decode' order by all"
        ).fetchall()
    d = "decoder/dense/"
    assert rows == [
        ("fused_add_rms_norm", [d + "attn_residual", d + "post_attention_layernorm"]),
        ("fused_add_rms_norm", [d + "ffn_residual", d + "input_layernorm"]),
        ("fused_add_rms_norm", [d + "ffn_residual", "norm"]),
        ("merged_gate_up_projection", [d + "mlp.gate_proj", d + "mlp.up_proj"]),
        ("merged_qkv_projection", [d + "self_attn.k_proj", d + "self_attn.q_proj", d + "self_attn.v_proj"]),
        ("silu_and_mul", [d + "mlp.act", d + "mlp.gated"]),
    ]
