"""Fusion rules as data (issue 14, item 1): every shipped rule file loads and cites the
framework source each rule was read from; a broken file is a located error; the rules match
the structure the frameworks' model code fuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsql.errors import SpecError
from archsql.schema.fusion import parse_rule_file
from archsql.specs import FUSION_DIR
from archsql.store import connect

RULE = """
framework: vllm
versions: ">=0.11"
rules:
  - name: silu_and_mul
    pattern: { chain: [ { op: silu }, { op: mul, port: 0 } ] }
    kernel: silu_and_mul
    source: { file: vllm/model_executor/layers/activation.py, function: SiluAndMul.forward_cuda }
"""


@pytest.fixture(scope="module")
def fusion_db(store_of):
    # the store tests/test_fusion_kernels.py reads too (store_of builds it once per session)
    return store_of("Meta-Llama-3.1-8B", "Qwen3-30B-A3B", "DeepSeek-V3")


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
    one = RULE.replace("[ { op: silu }, { op: mul, port: 0 } ]", "[ { op: silu } ]")
    with pytest.raises(SpecError, match=r"\$.rules\[0\].pattern.chain: a chain has two or more node patterns"):
        parse_rule_file(_write(tmp_path, one))
    typo = RULE.replace("{ op: silu }", "{ opp: silu }")
    with pytest.raises(SpecError) as info:
        parse_rule_file(_write(tmp_path, typo))
    assert "unknown node pattern key 'opp'" in str(info.value) and "did you mean 'op'" in str(info.value)
    with pytest.raises(SpecError, match=r"named <framework>-<version>\.yaml"):
        parse_rule_file(_write(tmp_path, RULE, name="sglang-0.5.yaml"))
    bad_phase = RULE.replace("    kernel: silu_and_mul\n", "    kernel: silu_and_mul\n    when: { phase: decoding }\n")
    with pytest.raises(SpecError, match="unknown phase"):
        parse_rule_file(_write(tmp_path, bad_phase))
    bad_dim = RULE.replace(
        "    kernel: silu_and_mul\n", "    kernel: silu_and_mul\n    when: { dim_in: { dim: d_head } }\n"
    )
    with pytest.raises(SpecError, match="missing required dim_in key 'values'"):
        parse_rule_file(_write(tmp_path, bad_dim))
    bad_flag = RULE.replace("    kernel: silu_and_mul\n", "    kernel: silu_and_mul\n    when: { flag: { nme: x } }\n")
    with pytest.raises(SpecError, match="unknown flag key 'nme'"):
        parse_rule_file(_write(tmp_path, bad_flag))
    region = RULE.replace("chain: [ { op: silu }, { op: mul, port: 0 } ]", "region: [ { op: dispatch } ]")
    with pytest.raises(SpecError, match=r"\$.rules\[0\].pattern.region: a region has two node patterns"):
        parse_rule_file(_write(tmp_path, region))
    call = RULE.replace("    kernel: silu_and_mul\n", "    kernel: silu_and_mul\n    call: yes please\n")
    with pytest.raises(SpecError, match="call must be true or false"):
        parse_rule_file(_write(tmp_path, call))
    bad_role = RULE.replace("{ op: silu }", "{ op: silu, role: [] }")
    with pytest.raises(
        SpecError, match=r"\$.rules\[0\].pattern.chain\[0\].role: role must be a str or a non-empty list"
    ):
        parse_rule_file(_write(tmp_path, bad_role))


def test_a_rule_file_row_carries_its_conditions(tmp_path):
    text = RULE.replace(
        "    kernel: silu_and_mul\n",
        "    kernel: silu_and_mul\n    when: { tp_min: 2, flag: { name: enable_x, default: true },"
        " dim_in: { dim: d_head, values: [64, 128] }, gpu_family: hopper }\n",
    ).replace("{ op: silu }", "{ op: [silu, gelu], role: [ffn, ffn_moe] }")
    (row,) = parse_rule_file(_write(tmp_path, text))
    assert row["steps"] == [
        {"ops": ["silu", "gelu"], "roles": ["ffn", "ffn_moe"], "port": 0},
        {"ops": ["mul"], "roles": None, "port": 0},
    ]
    assert (row["tp_min"], row["flag"], row["flag_default"]) == (2, "enable_x", True)
    assert (row["dim"], row["dim_values"], row["gpu_families"]) == ("d_head", [64, 128], ["hopper"])


def test_llama_matches_what_vllm_fuses(fusion_db):
    """Llama-3.1-8B in vLLM (vllm/model_executor/models/llama.py): LlamaAttention's
    qkv_proj is one QKVParallelLinear over q, k, v; LlamaMLP's gate_up_proj one
    MergedColumnParallelLinear followed by SiluAndMul; every RMSNorm after a residual add
    runs fused_add_rms_norm — post_attention_layernorm after the attention residual,
    the next layer's input_layernorm and the final norm after the FFN residual."""
    with connect(fusion_db) as con:
        rows = con.execute(
            "select rule, members from fusion_matches where model = 'Meta-Llama-3.1-8B'"
            " and framework = 'vllm' and version = '0.11' and phase = 'decode' order by all"
        ).fetchall()
    d = "decoder/dense/"
    assert rows == [
        # the all-reduce of o_proj's (down_proj's) partial sums, the add and the next norm: matched
        # structurally, launched only with TP > 1 and the pass flag (test_fusion_kernels.py)
        (
            "allreduce_fused_add_rms_norm",
            [d + "attn_residual#all_reduce[1]", d + "attn_residual", d + "post_attention_layernorm"],
        ),
        ("allreduce_fused_add_rms_norm", [d + "ffn_residual#all_reduce[1]", d + "ffn_residual", d + "input_layernorm"]),
        ("allreduce_fused_add_rms_norm", [d + "ffn_residual#all_reduce[1]", d + "ffn_residual", "norm"]),
        ("fused_add_rms_norm", [d + "attn_residual", d + "post_attention_layernorm"]),
        ("fused_add_rms_norm", [d + "ffn_residual", d + "input_layernorm"]),
        ("fused_add_rms_norm", [d + "ffn_residual", "norm"]),
        ("merged_gate_up_projection", [d + "mlp.gate_proj", d + "mlp.up_proj"]),
        ("merged_qkv_projection", [d + "self_attn.k_proj", d + "self_attn.q_proj", d + "self_attn.v_proj"]),
        # node rules match every attention score; their conditions (d_kv_lora = 512, the phase)
        # fail for a GQA model, in fusion_hits
        ("mla_decode_attention", [d + "self_attn.scores"]),
        ("mla_prefill_attention", [d + "self_attn.scores"]),
        ("silu_and_mul", [d + "mlp.act", d + "mlp.gated"]),
    ]


# --------------------------------------------------------------------------- pricing


def _saved_by_rule(con, model: str, deployment: str, workload: str) -> dict[str, float]:
    rows = con.execute(
        "select fused_by[1] as rule, sum(saved_bytes) from kernel_sol where model = ? and deployment = ?"
        " and workload = ? and framework = 'vllm' and version = '0.11' and len(fused_by) = 1 group by all",
        [model, deployment, workload],
    ).fetchall()
    return dict(rows)


def test_llama_prefill_saves_what_each_fused_kernel_does_not_move(fusion_db):
    """Llama-3.1-8B, 1×H200, prefill of T = 2048 tokens, BF16 (2 B), 32 layers, d = 4096,
    f = 14336.  One pass of the normed hidden state is T·d·2 = 16.78 MB, of the SiLU output
    T·f·2 = 58.72 MB, per layer:
      merged QKV      — k and v no longer read the normed input: 2 passes × 32
      merged gate_up  — up no longer reads it: 1 pass × 32
      SiLU-and-mul    — the SiLU output is neither written nor re-read: 2 × 58.72 MB × 32
      add + RMSNorm   — the norm does not re-read the sum (the residual is still written):
                        post-attention norm × 32, next layer's input norm × 31, final norm × 1
    Total 6.443 GB."""
    t, d, f, layers = 2048, 4096, 14336, 32
    hidden, act = t * d * 2, t * f * 2
    expected = {
        "merged_qkv_projection": 2 * hidden * layers,
        "merged_gate_up_projection": hidden * layers,
        "silu_and_mul": 2 * act * layers,
        "fused_add_rms_norm": hidden * (layers + (layers - 1) + 1),
    }
    with connect(fusion_db) as con:
        got = _saved_by_rule(con, "Meta-Llama-3.1-8B", "1xH200-single", "prefill_2k")
        unfused, fused = con.execute(
            "select unfused_time_s, time_s from step_kernel_sol where model = 'Meta-Llama-3.1-8B'"
            " and deployment = '1xH200-single' and workload = 'prefill_2k' and framework = 'vllm' and version = '0.11'"
        ).fetchone()
    assert got == pytest.approx(expected, rel=1e-9)
    assert sum(got.values()) == pytest.approx(6.443e9, rel=1e-3)
    assert fused < unfused


def test_fused_silu_mul_bytes_are_unfused_minus_the_intermediate_twice(fusion_db):
    """The SiLU output [T, f / tp] is written by silu and read by mul when unfused: on
    8×H200 TP8 at decode batch 64 (T = 64), f / 8 = 1792 values per token, so the fused
    kernel moves 2 · 64 · 1792 · 2 B = 458,752 B less per layer (× 32)."""
    with connect(fusion_db) as con:
        unfused, fused = con.execute(
            "select sum(o.bytes), sum(k.bytes) from op_sol as o inner join kernel_sol as k"
            " on k.model = o.model and k.deployment = o.deployment and k.workload = o.workload and k.uid = o.uid"
            " where o.model = 'Meta-Llama-3.1-8B' and o.deployment = '8xH200-tp8' and o.workload = 'decode_b64_c2k'"
            " and k.framework = 'sglang' and k.version = '0.5' and o.uid in ('decoder/dense/mlp.act', 'decoder/dense/mlp.gated')"
        ).fetchone()
    assert unfused - fused == pytest.approx(2 * 64 * (14336 // 8) * 2 * 32, rel=1e-12)
