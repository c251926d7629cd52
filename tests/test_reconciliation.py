"""Checkpoint reconciliation, tensor by tensor, against oracles the engine did not make:

- the real all-MiniLM-L6-v2 safetensors header (tests/fixtures/tensors), as a sparse file;
- for every catalog model with a meta inventory, a synthetic header built here from the
  inventory's ``checkpoint_tensors`` — transformers' own on-disk names and shapes, with the
  ``weight_scale_inv`` siblings of FP8 checkpoints and the ``_blocks``/``_scales`` of MXFP4
  ones — plus the layers transformers drops on load (``ignored_on_load``: DeepSeek's MTP
  layer), named and shaped as tests/test_inventory_params.py::expected_tensors does;
- DeepSeek-V3's FP8 and gpt-oss's MXFP4 layouts derived here from the config alone.

Disk dtypes of the synthetic headers (SOURCES.md of meta_inventories: the inventory's dtype
is the build dtype, not a per-tensor disk dtype): the quantizer's own tensors keep theirs
(float8_e4m3fn → F8_E4M3, uint8 → U8, ``*_scale_inv`` float32 → F32); everything else is the
checkpoint's dtype — the config's torch_dtype, or, where the config has none, the dtype the
model card publishes (PUBLISHED_DTYPE) — except the parameters FP32_PARAMETERS names, with
their source.  Mutations (drop, rename, dtype, swapped shapes, compensating errors) must
each be caught by the right guard with a located message."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner

from archsql.api import catalog
from archsql.cli import cli
from archsql.dtypes import DTYPE_BITS
from archsql.errors import StoreError
from archsql.ingest.checkpoint import to_table
from archsql.ingest.safetensors_headers import FileTensors
from archsql.publish_check import validate
from archsql.store import connect, freshness, write_checkpoint, write_checkpoints
from tests.conftest import FIXTURES, load_inventory
from tests.test_ingest_headers import write_header
from tests.test_inventory_params import (
    NO_QUERY_LORA,
    NOT_MODELED,
    _without_query_lora,
    expected_tensors,
    logical_tensors,
)

MINILM = FIXTURES / "tensors" / "sentence-transformers__all-MiniLM-L6-v2.safetensors_header.json"
CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"

TORCH = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
QUANTIZED = {"float8_e4m3fn": "F8_E4M3", "uint8": "U8"}
SCALE_SUFFIXES = ("_scale_inv",)
# configs without a torch_dtype: the dtype of the published checkpoint's unquantized tensors
PUBLISHED_DTYPE = {
    "gpt-oss-20b": "BF16",  # model card: MXFP4 MoE weights, BF16 for the rest
    "gpt-oss-120b": "BF16",
    "MiniMax-M2.5": "BF16",  # model card: BF16 / FP8 weights
}
# parameters stored in F32 whatever the model's dtype: DeepSeek's router selection bias
# (DeepSeek-V3 inference model.py: Gate.bias float32; vLLM PR #23640 "the
# e_score_correction_bias weights of the deepseek v3 model are FP32")
FP32_PARAMETERS = {"deepseek_v3": ("e_score_correction_bias",), "deepseek_v32": ("e_score_correction_bias",)}
_IN_LAYER = re.compile(r"^(?:.*?\.)?layers\.\d+\.(.*)$")


# --------------------------------------------------------------------------- helpers


def header_table(tensors: dict[str, tuple[str, list[int]]], checkpoint: str = "synthetic") -> pa.Table:
    """A checkpoint_tensors table of one file holding ``tensors`` back to back."""
    part = FileTensors("model.safetensors")
    pos = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_BITS[dtype] // 8
        part.names.append(name)
        part.dtypes.append(dtype)
        part.shapes.append(list(shape))
        part.begins.append(pos)
        part.ends.append(pos + size)
        pos += size
    return to_table(checkpoint, "safetensors", [part])


def inventory(model: str) -> dict:
    from archsql.specs import default_library

    config_file = default_library().model(model).config_file
    inv = load_inventory(config_file)
    inv["config"] = json.loads((CONFIGS / config_file).read_text())
    inv["model"] = model
    return inv


def inventory_models() -> list[str]:
    from archsql.specs import default_library

    lib = default_library()
    out = []
    for model in catalog():
        stem = lib.model(model).config_file.removesuffix(".json")
        if (FIXTURES / "meta_inventories" / f"{stem}.json.gz").is_file():
            out.append(model)
    return out


def synthetic_tensors(inv: dict) -> dict[str, tuple[str, list[int]]]:
    """On-disk tensors of a checkpoint, from its meta inventory (module doc)."""
    model = inv["model"]
    base = PUBLISHED_DTYPE.get(model) or TORCH[inv["dtype"]]
    fp32 = FP32_PARAMETERS.get(inv["model_type"], ())

    def disk_dtype(t: dict) -> str:
        if t["dtype"] in QUANTIZED:
            return QUANTIZED[t["dtype"]]
        if t["name"].endswith(SCALE_SUFFIXES) or t["name"].rsplit(".", 1)[-1] in fp32:
            return "F32"
        return base

    excluded = tuple(NOT_MODELED.get(model, {}))
    stored = inv["checkpoint_tensors"]
    stored = _without_query_lora(inv, stored) if model in NO_QUERY_LORA else stored  # test_inventory_params
    out = {
        t["name"]: (disk_dtype(t), list(t["shape"]))
        for t in stored
        if not (excluded and t["name"].startswith(excluded))
    }
    # layers dropped on load: a tensor with the same name within a layer as an inventory tensor
    # (the MTP layer repeats the last decoder layer) is stored like it, with its scale sibling
    in_layer = {m.group(1): v for name, v in out.items() if (m := _IN_LAYER.match(name))}
    produced = {t["name"] for t in logical_tensors(inv)}
    for name, shape in expected_tensors(inv).items():
        if name in produced or name in out:
            continue
        m = _IN_LAYER.match(name)
        source = in_layer.get(m.group(1)) if m else None
        if source is not None and source[1] == shape:
            out[name] = (source[0], shape)
            for suffix in SCALE_SUFFIXES:
                if (sibling := in_layer.get(m.group(1) + suffix)) is not None:
                    out[name + suffix] = sibling
        else:  # MTP glue: embedding, enorm/hnorm, eh_proj, shared head — unquantized
            out[name] = (base, shape)
    return out


def minilm_header() -> dict:
    fixture = json.loads(MINILM.read_text())
    header = {"__metadata__": fixture["__metadata__"]}
    return header | {t["name"]: {k: t[k] for k in ("dtype", "shape", "data_offsets")} for t in fixture["tensors"]}


def llama_tensors() -> dict[str, tuple[str, list[int]]]:
    return {n: ("BF16", s) for n, s in expected_tensors(inventory("Meta-Llama-3.1-8B")).items()}


def guards(errors) -> list[str]:
    return sorted(e.guard for e in errors)


# --------------------------------------------------------------------------- real header


def test_minilm_reconciles_with_its_real_header(tmp_path):
    """Every one of the 104 tensors of the real file is claimed, with its dtype and shape:
    101 parameters (F32), and the I64 position_ids buffer, claimed by the spec's buffers:
    entry (a saved non-parameter tensor: stored bytes, not parameters)."""
    path = write_header(tmp_path / "model.safetensors", minilm_header())
    assert validate("all-MiniLM-L6-v2", path) == []


def test_minilm_store_views(tmp_path):
    from archsql.api import build
    from archsql.ingest import read_checkpoint

    db = tmp_path / "s.duckdb"
    build(["all-MiniLM-L6-v2"], db=db)
    path = write_header(tmp_path / "model.safetensors", minilm_header())
    checkpoint = write_checkpoint(db, read_checkpoint(path), model="all-MiniLM-L6-v2")
    con = duckdb.connect(str(db), read_only=True)
    totals = con.execute(
        "select file_tensors, spec_tensors, matched, expected_bytes, actual_bytes, bytes_diff, reconciled "
        "from checkpoint_totals where checkpoint = ?",
        [checkpoint],
    ).fetchone()
    fixture = json.loads(MINILM.read_text())
    data_bytes = fixture["file_size_bytes"] - 8 - fixture["header_json_bytes"]
    assert totals == (104, 104, 104, data_bytes, data_bytes, 0, True)
    buffer = con.execute(
        "select uid, tensor, dtype, shape, data_bytes, elements, copies from weight_storage "
        "where is_buffer and profile = 'native'"
    ).fetchall()
    assert buffer == [("position_embeddings", "position_ids", "I64", [1, 512], 4096, None, 1)]
    (params,) = con.execute("select params from model_summary").fetchone()
    assert params == 22_713_216  # the buffer is not a parameter
    rows = con.execute("select status, count(*) from checkpoint_reconciliation group by status").fetchall()
    assert rows == [("ok", 104)]


# --------------------------------------------------------------------------- synthetic headers


@pytest.fixture(scope="module")
def reconciled_db(catalog_db, tmp_path_factory) -> Path:
    """The catalog store with the synthetic checkpoint of every model with an inventory."""
    db = tmp_path_factory.mktemp("reconcile") / "catalog.duckdb"
    shutil.copy(catalog_db, db)
    # one transaction: the derived rows of the checkpointed models computed once, after the last
    write_checkpoints(
        db,
        [(header_table(synthetic_tensors(inventory(m)), f"synthetic:{m}"), m, "native") for m in inventory_models()],
    )
    return db


@pytest.mark.parametrize("model", inventory_models())
def test_inventory_checkpoint_reconciles(reconciled_db, model):
    con = connect(reconciled_db)  # the derived rows (fresh after write_checkpoints): ms, not a live catalog query
    assert freshness(con).fresh
    bad = con.execute(
        "select status, canonical_name, expected_dtype, actual_dtype, expected_shape, actual_shape "
        "from checkpoint_reconciliation where checkpoint = ? and status != 'ok' limit 10",
        [f"synthetic:{model}"],
    ).fetchall()
    assert bad == []
    file_tensors, spec_tensors, bytes_diff, reconciled = con.execute(
        "select file_tensors, spec_tensors, bytes_diff, reconciled from checkpoint_totals where checkpoint = ?",
        [f"synthetic:{model}"],
    ).fetchone()
    assert (file_tensors - spec_tensors, bytes_diff, reconciled) == (0, 0, True)


def test_deepseek_v3_fp8_layout_derived_from_the_config():
    """FP8 blocks, derived here: every linear weight of attention, dense/shared/routed FFN is
    F8_E4M3 with an F32 weight_scale_inv of ceil(out / 128) × ceil(in / 128)
    (weight_block_size); norms, router gate, embeddings, lm_head and the MTP glue are BF16;
    the router bias F32.  91,991 tensors, as the real checkpoint's index."""
    inv = inventory("DeepSeek-V3")
    block_rows, block_cols = inv["config"]["quantization_config"]["weight_block_size"]
    linear = re.compile(r"\.(self_attn|mlp)\..*_proj(_with_mqa)?\.weight$")
    tensors: dict[str, tuple[str, list[int]]] = {}
    for name, shape in expected_tensors(inv).items():
        if linear.search(name):
            tensors[name] = ("F8_E4M3", shape)
            tensors[name + "_scale_inv"] = ("F32", [math.ceil(shape[0] / block_rows), math.ceil(shape[1] / block_cols)])
        else:
            tensors[name] = ("F32" if name.endswith("e_score_correction_bias") else "BF16", shape)
    assert len(tensors) == 91_991
    assert tensors["model.layers.3.mlp.experts.0.down_proj.weight_scale_inv"] == ("F32", [56, 16])
    assert tensors["model.layers.61.eh_proj.weight"] == ("BF16", [7168, 14336])
    assert validate("DeepSeek-V3", header_table(tensors)) == []


def test_gpt_oss_mxfp4_layout_derived_from_the_config():
    """MXFP4 experts, derived here: <p>_blocks U8 [experts, out, in / 32, 16] and <p>_scales U8
    [experts, out, in / 32] for gate_up_proj (out 2·intermediate) and down_proj; biases,
    attention (with sinks), router, norms, embeddings, lm_head BF16."""
    inv = inventory("gpt-oss-20b")
    cfg = inv["config"]
    experts, d, ff = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"]
    tensors = {
        n: ("BF16", s) for n, s in expected_tensors(inv).items() if not n.endswith(("gate_up_proj", "down_proj"))
    }
    for layer in range(cfg["num_hidden_layers"]):
        for p, out, inp in (("gate_up_proj", 2 * ff, d), ("down_proj", d, ff)):
            name = f"model.layers.{layer}.mlp.experts.{p}"
            tensors[name + "_blocks"] = ("U8", [experts, out, inp // 32, 16])
            tensors[name + "_scales"] = ("U8", [experts, out, inp // 32])
    assert validate("gpt-oss-20b", header_table(tensors)) == []


# --------------------------------------------------------------------------- mutations


def test_mutation_drop_a_tensor():
    tensors = llama_tensors()
    del tensors["model.layers.7.self_attn.k_proj.weight"]
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["weight", "weight"]  # the missing tensor, then the totals checksum
    missing = errors[0]
    assert (
        missing.location
        == "Meta-Llama-3.1-8B.yaml decoder/dense/self_attn.k_proj: model.layers.7.self_attn.k_proj.weight"
    )
    assert "is not in the checkpoint" in missing.message and missing.expected == "BF16 [1024, 4096]"
    assert "total bytes differ by -8,388,608" in errors[1].message


def test_mutation_rename_a_tensor():
    tensors = llama_tensors()
    tensors["model.layers.7.self_attn.kproj.weight"] = tensors.pop("model.layers.7.self_attn.k_proj.weight")
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["weight", "weight"]  # missing + unclaimed; the totals agree
    by_message = {e.message: e for e in errors}
    unclaimed = by_message["file tensor is claimed by no spec tensor"]
    assert unclaimed.location == "synthetic/model.safetensors: model.layers.7.self_attn.kproj.weight"
    assert "did you mean 'model.layers.7.self_attn.k_proj.weight'" in unclaimed.hint
    missing = next(e for e in errors if e is not unclaimed)
    assert "did you mean 'model.layers.7.self_attn.kproj.weight'" in missing.hint


def test_mutation_change_a_dtype():
    tensors = llama_tensors()
    tensors["model.norm.weight"] = ("F32", [4096])
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["packing", "weight"]
    dtype = next(e for e in errors if e.guard == "packing")
    assert dtype.location == "synthetic/model.safetensors: model.norm.weight"
    assert (dtype.message, dtype.expected, dtype.got) == (
        "stored dtype differs (data of weight, node norm)",
        "BF16",
        "F32",
    )


def test_mutation_swap_two_shapes():
    """gate_proj [14336, 4096] and down_proj [4096, 14336] of one layer swapped: every element
    count and the totals agree, the shapes cannot be joined."""
    tensors = llama_tensors()
    gate, down = "model.layers.3.mlp.gate_proj.weight", "model.layers.3.mlp.down_proj.weight"
    tensors[gate], tensors[down] = tensors[down], tensors[gate]
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["shape", "shape"]
    assert {e.location.rsplit(": ", 1)[1] for e in errors} == {gate, down}
    first = next(e for e in errors if e.location.endswith(gate))
    assert (first.expected, first.got) == ("[14336, 4096]", "[4096, 14336]")


def test_mutation_two_errors_that_cancel_in_total_bytes():
    """model.norm.weight stored F32 (+8,192 bytes) and lm_head one row short (−8,192 bytes):
    the totals agree, each tensor is still an error."""
    tensors = llama_tensors()
    tensors["model.norm.weight"] = ("F32", [4096])
    tensors["lm_head.weight"] = ("BF16", [128255, 4096])
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["packing", "weight"]
    elements = next(e for e in errors if e.guard == "weight")
    assert elements.location.endswith("lm_head.weight") and "element count differs" in elements.message


def test_mutation_dtype_and_count_both_wrong_same_bytes():
    """A BF16 [4096] norm stored as U8 [8192]: same bytes; dtype and element count are two
    separate errors (packing, weight), no totals error."""
    tensors = llama_tensors()
    tensors["model.layers.0.input_layernorm.weight"] = ("U8", [8192])
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors))
    assert guards(errors) == ["packing", "weight"]
    assert all(e.location.endswith("model.layers.0.input_layernorm.weight") for e in errors)


def llama_fp8_tensors() -> dict[str, tuple[str, list[int]]]:
    """Llama-3.1-8B in the fp8 profile, derived here: projections F8_E4M3 + F32 blocks."""
    out = {}
    for name, (dtype, shape) in llama_tensors().items():
        if name.endswith("_proj.weight"):
            out[name] = ("F8_E4M3", shape)
            out[name + "_scale_inv"] = ("F32", [math.ceil(shape[0] / 128), math.ceil(shape[1] / 128)])
        else:
            out[name] = (dtype, shape)
    return out


def test_profile_reconciles_and_quantized_parts_are_packing_errors():
    tensors = llama_fp8_tensors()
    assert validate("Meta-Llama-3.1-8B", header_table(tensors), profile="fp8") == []
    # a scale sibling with the wrong grid (per 64 rows) and an FP8 weight stored as BF16
    tensors["model.layers.2.self_attn.o_proj.weight_scale_inv"] = ("F32", [64, 32])
    tensors["model.layers.2.mlp.up_proj.weight"] = ("BF16", [14336, 4096])
    errors = validate("Meta-Llama-3.1-8B", header_table(tensors), profile="fp8")
    packing = [e for e in errors if e.guard == "packing"]
    assert {e.location.rsplit(": ", 1)[1] for e in packing} == {
        "model.layers.2.self_attn.o_proj.weight_scale_inv",
        "model.layers.2.mlp.up_proj.weight",
    }
    scale = next(e for e in packing if "scale_inv" in e.location)
    assert "weight_scale_inv of weight" in scale.message and scale.expected == "1,024 = [32, 32]"
    assert validate("Meta-Llama-3.1-8B", header_table(tensors))  # the native (BF16) spec rejects the FP8 file


def test_multimodal_prefixes_are_normalized():
    """The same tensors under a vision-language wrapper (language_model.model.*,
    language_model.lm_head.*) reconcile: both sides are matched by canonical name."""
    wrapped = {}
    for name, value in llama_tensors().items():
        prefix = "language_model." if name.startswith(("model.", "lm_head.")) else ""
        wrapped[prefix + name] = value
    assert validate("Meta-Llama-3.1-8B", header_table(wrapped)) == []


# --------------------------------------------------------------------------- other guards


def test_analysis_and_shape_guards(tmp_path):
    from tests.test_quant_schemes import spec_file

    unknown = spec_file(tmp_path, "dims: { d_ff: config.intermediate_sise }\n")
    [error] = validate(unknown)
    assert (error.guard, error.location) == ("analysis", f"{unknown}:3:9 $.dims.d_ff")
    assert "intermediate_sise" in error.message and "intermediate_size" in error.hint
    kv_heads = spec_file(tmp_path, "dims: { n_kv_heads: 5 }\n")  # 32 query heads in 5 groups
    errors = validate(kv_heads)
    assert errors and {e.guard for e in errors} == {"shape"}
    assert any(e.location.startswith(str(SPECS_DIR / "gqa_attention.yaml")) for e in errors)
    assert any("query heads must be a multiple of key/value heads" in e.message for e in errors)


SPECS_DIR = Path(__file__).parents[1] / "archsql" / "specs" / "components"


def test_override_matching_nothing_is_a_packing_error(tmp_path):
    from tests.test_quant_schemes import spec_file

    path = spec_file(
        tmp_path, "quant_context:\n  overrides:\n    - { name: f32_qnorm, match: '*.q_norm', dtype: F32 }\n"
    )
    [error] = validate(path)
    assert error.guard == "packing"
    assert error.location == f"{path}:5:26 $.quant_context.overrides[0].match"
    assert "override:f32_qnorm: pattern '*.q_norm' matches no tensor" in error.message


def test_unreadable_checkpoint_is_a_weight_error(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x10\x00")
    [error] = validate("Meta-Llama-3.1-8B", bad)
    assert error.guard == "weight" and error.location == str(bad) and "shorter" in error.message


# --------------------------------------------------------------------------- store and CLI


def test_write_checkpoint_replaces_the_same_checkpoint(store_of, tmp_path):
    db = tmp_path / "s.duckdb"
    shutil.copy(store_of("Meta-Llama-3.1-8B"), db)
    tensors = llama_tensors()
    write_checkpoint(db, header_table(tensors, "ck"), model="Meta-Llama-3.1-8B")
    del tensors["model.norm.weight"]
    write_checkpoint(db, header_table(tensors, "ck"), model="Meta-Llama-3.1-8B")
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("select count(*) from checkpoint_tensors").fetchone() == (290,)
    assert con.execute("select * from checkpoints").fetchall() == [("ck", "Meta-Llama-3.1-8B", "native")]
    assert con.execute("select missing, reconciled from checkpoint_totals").fetchone() == (1, False)
    con.close()
    with pytest.raises(StoreError, match=r"model 'Meta-Llama-3\.1-70b' is not in the store"):
        write_checkpoint(db, header_table(tensors, "ck2"), model="Meta-Llama-3.1-70b")
    # the store holds the native storage and every shipped precision profile (fp8, nvfp4, …)
    with pytest.raises(StoreError, match="no storage profile 'fp9'"):
        write_checkpoint(db, header_table(tensors, "ck2"), model="Meta-Llama-3.1-8B", profile="fp9")


def test_cli_validate_and_checkpoint(tmp_path):
    good = write_header(tmp_path / "model.safetensors", minilm_header())
    runner = CliRunner()
    result = runner.invoke(cli, ["validate", "all-MiniLM-L6-v2", "--checkpoint", str(good)])
    assert result.exit_code == 0, result.output
    assert "publishable" in result.output
    header = minilm_header()
    header["pooler.dense.bias"]["dtype"] = "I32"  # same bytes, wrong dtype
    bad = write_header(tmp_path / "bad.safetensors", header)
    result = runner.invoke(cli, ["validate", "all-MiniLM-L6-v2", "--checkpoint", str(bad)])
    assert result.exit_code == 1
    assert "packing: 1 error" in result.output and "pooler.dense.bias" in result.output
    assert "not publishable (1 error)" in result.output
    result = runner.invoke(cli, ["checkpoint", str(good), "--format", "csv"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "checkpoint,format,file,name,dtype,shape,offset_begin,offset_end"
    assert len(lines) == 105 and ",embeddings.position_ids,I64," in lines[1]
