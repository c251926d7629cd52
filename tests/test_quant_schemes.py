"""Quantization schemes as data (archsql/specs/quant): every stored layout below is derived
here by hand from the format's own source (named per test), never from the engine; which
scheme a real checkpoint's quantization description selects (tests/fixtures/quant_configs);
closed schemas with located errors; quant_context rules; precision profiles.

Bits per logical element, by format: an unquantized BF16 weight 16; FP8 8 (+ scales);
MXFP4 and NVFP4 4 (two e2m1 values per byte, + scales); GPTQ / AWQ int4 4 (eight per int32)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsql.dtypes import DTYPE_BITS
from archsql.errors import SpecError
from archsql.evaluator import evaluate
from archsql.evaluator.storage import bind_storage
from archsql.schema.quant import (
    QUANT_DIR,
    FormulaError,
    default_schemes,
    glob_regex,
    load_schemes,
    matches,
    quant_document,
    read_hf_quant_config,
    rules_from_config,
)
from tests.conftest import FIXTURES, load_inventory

SCHEMES = default_schemes()
QUANT_CONFIGS = FIXTURES / "quant_configs"
SPECS = Path(__file__).parents[1] / "archsql" / "specs"


def layout(scheme: str, shape: list[int], context: str = "BF16", **params) -> dict[str, tuple[str, str, list[int]]]:
    """part → (stored name, dtype, shape) of a logical tensor ``w.weight`` of module ``w``."""
    s = SCHEMES[scheme]
    return {
        part: (name, dtype, shp)
        for part, name, dtype, shp, _ in s.stored("w.weight", "w", shape, s.bind_params(params, context))
    }


def test_the_required_schemes_are_registered():
    required = {"none", "fp8_block", "fp8_tensor", "fp8_tensor_ct", "fp8_channel", "mxfp4", "nvfp4", "gptq_int4"}
    assert required | {"awq_int4"} <= set(SCHEMES)
    for s in SCHEMES.values():
        assert s.doc and s.element_format and s.scale_granularity
        assert s.packing >= 1


# --------------------------------------------------------------------------- layouts, by hand


def test_none_is_the_storage_dtype():
    assert layout("none", [30522, 384], "F32") == {"data": ("w.weight", "F32", [30522, 384])}
    assert layout("none", [4096], dtype="F16") == {"data": ("w.weight", "F16", [4096])}


def test_fp8_block_deepseek():
    """transformers FP8Linear: weight float8_e4m3fn [out, in] and weight_scale_inv float32
    [ceil(out / 128), ceil(in / 128)].  DeepSeek-V3 expert down_proj [7168, 2048] → [56, 16];
    kv_a_proj_with_mqa [576, 7168] → [ceil(4.5) = 5, 56] (both as the FP8 inventory lists them)."""
    assert layout("fp8_block", [7168, 2048]) == {
        "data": ("w.weight", "F8_E4M3", [7168, 2048]),
        "weight_scale_inv": ("w.weight_scale_inv", "F32", [56, 16]),
    }
    assert layout("fp8_block", [576, 7168])["weight_scale_inv"][2] == [5, 56]
    inventory = {t["name"]: t["shape"] for t in load_inventory("deepseek-ai__DeepSeek-V3.json")["checkpoint_tensors"]}
    assert inventory["model.layers.3.mlp.experts.0.down_proj.weight_scale_inv"] == [56, 16]
    assert inventory["model.layers.3.self_attn.kv_a_proj_with_mqa.weight_scale_inv"] == [5, 56]


def test_fp8_tensor_modelopt():
    """ModelOpt FP8 export: weight F8_E4M3, scalar F32 weight_scale and input_scale."""
    assert layout("fp8_tensor", [8192, 8192]) == {
        "data": ("w.weight", "F8_E4M3", [8192, 8192]),
        "weight_scale": ("w.weight_scale", "F32", []),
        "input_scale": ("w.input_scale", "F32", []),
    }


def test_fp8_compressed_tensors():
    """compressed-tensors _initialize_scale_zero_point: weight scale (out, 1) per channel, (1,)
    per tensor, in the weight's original dtype; an input scale (1,) only for static activations."""
    assert layout("fp8_channel", [4096, 14336]) == {
        "data": ("w.weight", "F8_E4M3", [4096, 14336]),
        "weight_scale": ("w.weight_scale", "BF16", [4096, 1]),
    }
    assert layout("fp8_tensor_ct", [4096, 14336], static_input=1) == {
        "data": ("w.weight", "F8_E4M3", [4096, 14336]),
        "weight_scale": ("w.weight_scale", "BF16", [1]),
        "input_scale": ("w.input_scale", "BF16", [1]),
    }


def test_mxfp4_is_the_gpt_oss_layout():
    """gpt-oss experts as transformers' MXFP4 quantizer writes them (the meta inventory):
    gate_up_proj [32 experts, 5760, 2880] → _blocks U8 [32, 5760, 90, 16], _scales U8 [32, 5760, 90]."""
    inventory = {t["name"]: t for t in load_inventory("openai__gpt-oss-20b.json")["checkpoint_tensors"]}
    s = SCHEMES["mxfp4"]
    got = {
        name: (dtype, shape)
        for _, name, dtype, shape, _ in s.stored(
            "model.layers.0.mlp.experts.gate_up_proj",
            "model.layers.0.mlp.experts.gate_up_proj",
            [32, 5760, 2880],
            {"block": 32},
        )
    }
    expected = {
        n: ("U8", inventory[n]["shape"])
        for n in ("model.layers.0.mlp.experts.gate_up_proj_blocks", "model.layers.0.mlp.experts.gate_up_proj_scales")
    }
    assert got == expected
    assert {inventory[n]["dtype"] for n in expected} == {"uint8"}


def test_nvfp4_modelopt():
    """ModelOpt NVFP4: weight U8 [out, in / 2], weight_scale F8_E4M3 [out, in / 16],
    weight_scale_2 and input_scale scalar F32."""
    assert layout("nvfp4", [7168, 2048]) == {
        "data": ("w.weight", "U8", [7168, 1024]),
        "weight_scale": ("w.weight_scale", "F8_E4M3", [7168, 128]),
        "weight_scale_2": ("w.weight_scale_2", "F32", []),
        "input_scale": ("w.input_scale", "F32", []),
    }


def test_gptq_and_awq_int4():
    """AutoGPTQ QuantLinear (bits 4): qweight int32 [in / 8, out], qzeros int32 [groups, out / 8],
    scales float16 [groups, out], g_idx int32 [in]; group_size -1 is one group.  AutoAWQ GEMM:
    qweight [in, out / 8], qzeros [in / g, out / 8], scales [in / g, out]."""
    assert layout("gptq_int4", [4096, 11008]) == {
        "data": ("w.qweight", "I32", [1376, 4096]),
        "qzeros": ("w.qzeros", "I32", [86, 512]),
        "scales": ("w.scales", "F16", [86, 4096]),
        "g_idx": ("w.g_idx", "I32", [11008]),
    }
    assert layout("gptq_int4", [4096, 11008], group_size=-1)["qzeros"][2] == [1, 512]
    assert layout("awq_int4", [4096, 11008]) == {
        "data": ("w.qweight", "I32", [11008, 512]),
        "qzeros": ("w.qzeros", "I32", [86, 512]),
        "scales": ("w.scales", "F16", [86, 4096]),
    }


NOMINAL_BITS = {"none": 16, "fp8_block": 8, "fp8_tensor": 8, "fp8_tensor_ct": 8, "fp8_channel": 8}
NOMINAL_BITS |= {"mxfp4": 4, "nvfp4": 4, "gptq_int4": 4, "awq_int4": 4}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(NOMINAL_BITS)), st.integers(1, 64), st.integers(1, 64), st.integers(0, 2))
def test_packing_and_dtype_agree_with_the_element_format(scheme, rows, cols, lead):
    """For every scheme: the data part's stored elements × packing are the logical elements,
    and its bytes are the format's nominal bits per logical element."""
    shape = [3] * lead + [rows * 256, cols * 256]
    s = SCHEMES[scheme]
    params = s.bind_params({}, "BF16")
    data = next(p for p in s.stored("w.weight", "w", shape, params) if p[0] == "data")
    _, _, dtype, stored, packing = data
    assert math.prod(stored) * packing == math.prod(shape)
    assert math.prod(stored) * DTYPE_BITS[dtype] == NOMINAL_BITS[scheme] * math.prod(shape)


def test_a_formula_that_is_not_whole_is_reported():
    with pytest.raises(FormulaError, match=r"nvfp4 data axis 'cols / 2' is 2881/2 for rows = 4, cols = 2881"):
        layout("nvfp4", [4, 2881])


# --------------------------------------------------------------------------- checkpoint configs


def detect(config_file: Path):
    config = json.loads(config_file.read_text())
    doc, source = quant_document(config, read_hf_quant_config(config_file))
    rule, ignore, issues = rules_from_config(doc, source, SCHEMES, str(config_file))
    assert issues == []
    return rule.method, rule.params, ignore, source


def test_fine_grained_fp8_configs():
    method, params, ignore, source = detect(SPECS / "configs" / "deepseek-ai__DeepSeek-V3.json")
    assert (method, params, ignore, source) == (
        "fp8_block",
        {"block_rows": 128, "block_cols": 128},
        [],
        "config.json quantization_config",
    )
    method, params, ignore, _ = detect(QUANT_CONFIGS / "Qwen__Qwen3-30B-A3B-FP8.json")
    assert method == "fp8_block" and len(ignore) == 145 and "model.layers.0.mlp.gate" in ignore


def test_mxfp4_config():
    method, params, ignore, _ = detect(SPECS / "configs" / "openai__gpt-oss-20b.json")
    assert (method, params) == ("mxfp4", {})
    assert ignore == ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]


def test_modelopt_hf_quant_config_wins():
    method, params, ignore, source = detect(QUANT_CONFIGS / "nvidia__Qwen3-235B-A22B-NVFP4.json")
    assert (method, params, source) == ("nvfp4", {"group_size": 16}, "hf_quant_config.json")
    assert len(ignore) == 95 and "lm_head" in ignore
    assert detect(QUANT_CONFIGS / "nvidia__Llama-3.1-70B-Instruct-FP8.json")[:3] == ("fp8_tensor", {}, ["lm_head"])
    assert detect(QUANT_CONFIGS / "Qwen__Qwen3-32B-FP8-Static-PerTensor.json")[0] == "fp8_tensor"


def test_modelopt_in_config_json():
    """ModelOpt written into config.json: quant_method modelopt (GLM-5.1-NVFP4), or no
    quant_method with producer modelopt (Qwen3-32B-FP8-Static-PerTensor's config alone)."""
    method, params, ignore, _ = detect(QUANT_CONFIGS / "nvidia__GLM-5.1-NVFP4.json")
    assert (method, params) == ("nvfp4", {"group_size": 16}) and ignore[0] == "lm_head"
    config = json.loads((QUANT_CONFIGS / "Qwen__Qwen3-32B-FP8-Static-PerTensor.json").read_text())
    doc, source = quant_document(config, None)
    rule, ignore, issues = rules_from_config(doc, source, SCHEMES, "config.json")
    assert (rule.method, ignore, issues) == ("fp8_tensor", ["lm_head"], [])


@pytest.mark.parametrize(
    ("doc", "method", "params"),
    [
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
                    }
                },
                "ignore": ["lm_head"],
            },
            "fp8_channel",
            {},
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
                    }
                },
            },
            "fp8_tensor_ct",
            {"static_input": 1},
        ),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq_int4", {"group_size": 128}),
        ({"quant_method": "awq", "bits": 4, "group_size": 64, "version": "gemm"}, "awq_int4", {"group_size": 64}),
    ],
)
def test_other_config_formats(doc, method, params):
    rule, _, issues = rules_from_config(doc, "config.json quantization_config", SCHEMES, "config.json")
    assert (rule.method, rule.params, issues) == (method, params, [])


def test_an_unknown_quantization_is_reported():
    rule, _, issues = rules_from_config(
        {"quant_method": "bitsandbytes"}, "config.json quantization_config", SCHEMES, "c.json"
    )
    assert rule is None
    assert "matches no quant scheme" in issues[0].message and "archsql/specs/quant" in issues[0].hint


# --------------------------------------------------------------------------- schemes are data


def test_adding_a_scheme_is_yaml_only(tmp_path):
    shutil.copy(QUANT_DIR / "none.yaml", tmp_path)
    (tmp_path / "int8_channel.yaml").write_text(
        """\
scheme: int8_channel
doc: W8A16 int8 weights with one F16 scale per output row (an example added as data only).
element_format: int8 (symmetric)
scale_granularity: channel
params: {}
applies_to: { ops: [linear], tensors: [weight] }
axes: [rows, cols]
data: { name: "{name}", dtype: I8, packing: 1, shape: ["...", rows, cols] }
siblings:
  weight_scale: { name: "{name}_scale", dtype: F16, shape: ["...", rows] }
from_config:
  - when: { quant_method: int8_channel }
"""
    )
    schemes = load_schemes(tmp_path)
    s = schemes["int8_channel"]
    stored = s.stored("q.weight", "q", [4096, 4096], s.bind_params({}, "BF16"))
    assert [(p, n, d, sh) for p, n, d, sh, _ in stored] == [
        ("data", "q.weight", "I8", [4096, 4096]),
        ("weight_scale", "q.weight_scale", "F16", [4096]),
    ]
    rule, _, _ = rules_from_config({"quant_method": "int8_channel"}, "config.json", schemes, "c.json")
    assert rule.method == "int8_channel"


def test_scheme_files_are_closed_and_errors_located(tmp_path):
    shutil.copy(QUANT_DIR / "none.yaml", tmp_path)
    (tmp_path / "bad.yaml").write_text(
        """\
scheme: bad
doc: a broken scheme
element_format: x
scale_granularity: blocky
params: { block: { default: 32 } }
applies_to: { ops: [linearr], tensors: [weight] }
axes: [rows, cols]
data: { name: "{name}", dtype: F8E4M3, packng: 1, shape: ["...", rows, "cols / blok"] }
"""
    )
    with pytest.raises(SpecError) as err:
        load_schemes(tmp_path)
    rendered = [i.render() for i in err.value.issues]
    assert any("bad.yaml:4" in r and "unknown scale granularity" in r for r in rendered)
    assert any("bad.yaml:6" in r and "unknown op 'linearr'" in r and "did you mean 'linear'" in r for r in rendered)
    assert any("bad.yaml:8" in r and "unknown key 'packng'" in r and "did you mean 'packing'" in r for r in rendered)
    assert any("unknown dtype 'F8E4M3'" in r and "did you mean 'F8_E4M3'" in r for r in rendered)
    assert any("unknown dim 'blok'" in r and "did you mean 'block'" in r for r in rendered)


def test_glob_semantics():
    """Whole path, enclosing module, or trailing dotted part — never a substring."""
    gate = glob_regex("gate")
    assert matches(gate, "model.layers.3.mlp.gate", "model.layers.3.mlp.gate.weight")
    assert not matches(gate, "model.layers.3.mlp.gate_proj", "model.layers.3.mlp.gate_proj.weight")
    layer0 = glob_regex("model.layers.0")
    assert matches(layer0, "model.layers.0.self_attn.q_proj", "x")
    assert not matches(layer0, "model.layers.10.self_attn.q_proj", "x")
    star = glob_regex("model.layers.*.self_attn")
    assert matches(star, "model.layers.17.self_attn.o_proj", "x")
    bias = glob_regex("*.e_score_correction_bias")
    assert matches(bias, "model.layers.3.mlp.gate", "model.layers.3.mlp.gate.e_score_correction_bias")
    assert not matches(bias, "model.layers.3.mlp.gate", "model.layers.3.mlp.gate.weight")


# --------------------------------------------------------------------------- quant_context


def spec_file(tmp_path: Path, extra: str, base: str = "Meta-Llama-3.1-8B", **fields) -> Path:
    """A model extending a catalog model (copied next to it), with ``extra`` YAML appended."""
    shutil.copy(SPECS / "models" / f"{base}.yaml", tmp_path)
    head = [f"model: t-{base}", f"extends: {base}"] + [f"{k}: {v}" for k, v in fields.items()]
    path = tmp_path / f"t-{base}.yaml"
    path.write_text("\n".join(head) + "\n" + extra)
    return path


def test_quant_context_errors_are_located(tmp_path):
    path = spec_file(
        tmp_path,
        """\
quant_context:
  dtype: BF61
  defualt: { method: fp8_block }
  roles:
    atention: fp8_block
    ffn: { method: fp8_blok }
  overrides:
    - { name: a, match: "*.q_proj", method: nvfp4, params: { group: 16 } }
    - { name: b, match: lm_head, method: fp8_block, dtype: F32 }
""",
    )
    with pytest.raises(SpecError) as err:
        evaluate(path)
    rendered = "\n".join(i.render() for i in err.value.issues)
    name = path.name
    assert (
        f"{name}:5:3 $.quant_context.defualt: unknown key 'defualt'" in rendered
        and "did you mean 'default'" in rendered
    )
    assert f"{name}:4:10 $.quant_context.dtype: unknown dtype 'BF61'" in rendered
    assert "unknown role 'atention'" in rendered and "did you mean 'attention'" in rendered
    assert "unknown quant method 'fp8_blok'" in rendered and "did you mean 'fp8_block'" in rendered
    assert "unknown param of scheme 'nvfp4' 'group'" in rendered
    assert "dtype goes with method 'none'" in rendered


def test_rules_per_role_override_and_layer(tmp_path):
    """default → roles → ignore → overrides; an ignore pattern naming one layer splits that
    weight's rows by layer; a pattern that matches nothing is a packing issue, located."""
    path = spec_file(
        tmp_path,
        """\
quant_context:
  default: { method: fp8_block }
  roles: { ffn: { method: nvfp4 } }
  ignore: [model.layers.0.self_attn, model.layers.*.self_atn]
  overrides:
    - { name: keep_down, match: "*.down_proj", method: none, dtype: F32 }
""",
    )
    analysis = evaluate(path)
    binding = bind_storage(analysis)
    rows = {(r["uid"], r["part"], str(r["layers"])): r for r in binding.table.to_pylist() if r["tensor"] == "weight"}
    q0 = rows[("decoder/dense/self_attn.q_proj", "data", "[0]")]
    q = rows[("decoder/dense/self_attn.q_proj", "data", str(list(range(1, 32))))]
    assert (q0["scheme"], q0["dtype"], q0["rule"]) == ("none", "BF16", "ignore:model.layers.0.self_attn")
    assert (q["scheme"], q["dtype"]) == ("fp8_block", "F8_E4M3")
    assert rows[("decoder/dense/mlp.up_proj", "data", str(list(range(32))))]["scheme"] == "nvfp4"
    down = rows[("decoder/dense/mlp.down_proj", "data", str(list(range(32))))]
    assert (down["scheme"], down["dtype"], down["rule"]) == ("none", "F32", "override:keep_down")
    assert rows[("lm_head", "data", "None")]["scheme"] == "none"  # fp8_block applies to linear layers only
    [issue] = binding.issues
    assert issue.file == str(path) and issue.line == 6
    assert "pattern 'model.layers.*.self_atn' matches no tensor" in issue.message
    assert issue.hint == "did you mean 'model.layers.*.self_attn'?"


def test_profile_rebinds_the_same_spec():
    """A precision profile is the same pass with other rules: DeepSeek-V3 in NVFP4 keeps its
    weights (params) and its unquantized tensors; every FP8 weight becomes NVFP4."""
    analysis = evaluate("DeepSeek-V3")
    native = [r for r in analysis.tables["storage_tensors"].to_pylist() if r["profile"] == "native"]
    nvfp4 = bind_storage(analysis, profile="nvfp4")
    assert nvfp4.issues == []
    rows = nvfp4.table.to_pylist()
    assert {r["profile"] for r in rows} == {"nvfp4"}
    key = ("uid", "tensor", "part")
    native_data = {tuple(r[k] for k in key): r for r in native if r["part"] == "data"}
    for r in (r for r in rows if r["part"] == "data"):
        before = native_data[tuple(r[k] for k in key)]
        if before["scheme"] == "fp8_block":
            assert (r["scheme"], r["dtype"]) == ("nvfp4", "U8")
        else:
            assert (r["scheme"], r["dtype"]) == ("none", before["dtype"])
    assert any(r["dtype"] == "F32" and r["tensor"] == "e_score_correction_bias" for r in rows)
    with pytest.raises(SpecError, match="unknown precision profile 'nvfp5'"):
        bind_storage(analysis, profile="nvfp5")


def test_profile_equals_a_spec_with_that_quant_context(tmp_path):
    """Same code path: Llama in the nvfp4 profile stores exactly what a spec writing the
    profile's quant_context stores."""
    profile = bind_storage(evaluate("Meta-Llama-3.1-8B"), profile="nvfp4").table
    spec = bind_storage(evaluate(spec_file(tmp_path, "quant_context: { default: { method: nvfp4 } }\n"))).table
    cols = ["uid", "tensor", "part", "name", "layers", "scheme", "dtype", "shape", "packing"]
    assert sorted(profile.select(cols).to_pylist(), key=str) == sorted(spec.select(cols).to_pylist(), key=str)
