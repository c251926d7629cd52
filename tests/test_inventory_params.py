"""Parameter counts against an independent oracle: transformers' own modules built on the
meta device (tests/fixtures/meta_inventories).  Difference must be exactly 0, in total and
per role, for every catalog model.

Two adjustments, both derived here from the inventory file and the config, never from the
engine: (1) quantization siblings the inventory lists where transformers applied the FP8
quantizer on meta (``*.weight_scale_inv``) are storage, not parameters (checkpoint
reconciliation checks them); (2) layers transformers drops on load (``ignored_on_load``,
the DeepSeek multi-token-prediction layer ``model.layers.{num_hidden_layers}``) are on disk
and in the spec, so their parameters are added: per MTP layer its own embedding and head
(2·vocab·d), enorm/hnorm/shared_head.norm (3·d), eh_proj (2d·d), plus one decoder layer —
the same tensors as the inventory's last decoder layer (a MoE layer)."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

from archsql.api import catalog
from tests.conftest import FIXTURES, load_inventory

MODELS = catalog()


def inventory_role(name: str) -> str:
    """Role of a checkpoint tensor, read from its transformers module path only."""
    if "embed_tokens" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".self_attn." in name:
        return "attention"
    if any(k in name for k in (".block_sparse_moe.", ".mlp.experts.", ".mlp.gate.", ".mlp.shared_experts.")):
        return "ffn_moe"
    if ".mlp." in name:
        return "ffn"
    if "layernorm" in name or name == "model.norm.weight":
        return "norm"
    raise AssertionError(f"inventory tensor with no role mapping: {name}")


QUANT_SIBLINGS = (".weight_scale_inv",)


def _inventory_for(con, model: str) -> dict:
    (config_file,) = con.execute("select config_file from models where model = ?", [model]).fetchone()
    inv = load_inventory(config_file)
    inv["config"] = json.loads((FIXTURES.parents[1] / "archsql" / "specs" / "configs" / config_file).read_text())
    return inv


def logical_tensors(inv: dict) -> list[dict]:
    return [t for t in inv["checkpoint_tensors"] if not t["name"].endswith(QUANT_SIBLINGS)]


def dropped_layer_params(inv: dict) -> dict[str, int]:
    """Per-role parameters of the MTP layers transformers drops on load (see module doc)."""
    cfg = inv["config"]
    n_mtp = cfg.get("num_nextn_predict_layers", 0) if inv["ignored_on_load"] else 0
    if not n_mtp:
        return {}
    d, vocab, last = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"] - 1
    by_role = {"mtp": 2 * vocab * d + 3 * d + 2 * d * d}
    for t in logical_tensors(inv):
        if t["name"].startswith(f"model.layers.{last}."):
            role = inventory_role(t["name"])
            by_role[role] = by_role.get(role, 0) + math.prod(t["shape"])
    return {role: n * n_mtp for role, n in by_role.items()}


def test_catalog_has_the_required_models():
    required = {
        "Meta-Llama-3.1-8B",
        "Meta-Llama-3.1-70B",
        "Meta-Llama-3.1-405B",
        "Qwen2.5-7B",
        "Qwen2.5-72B",
        "Qwen3-0.6B",
        "Qwen3-8B",
        "Qwen3-32B",
        "Qwen3-30B-A3B",
        "Qwen3-235B-A22B",
        "Mixtral-8x7B-v0.1",
        "Mixtral-8x22B-v0.1",
    }
    assert required <= set(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_total_params_equal_inventory(catalog_db, model):
    con = duckdb.connect(str(catalog_db), read_only=True)
    inv = _inventory_for(con, model)
    assert sum(math.prod(t["shape"]) for t in inv["checkpoint_tensors"]) == inv["num_checkpoint_elements"]
    expected = sum(math.prod(t["shape"]) for t in logical_tensors(inv)) + sum(dropped_layer_params(inv).values())
    (params,) = con.execute("select params from model_summary where model = ?", [model]).fetchone()
    assert params - expected == 0


@pytest.mark.parametrize("model", MODELS)
def test_params_by_role_equal_inventory(catalog_db, model):
    con = duckdb.connect(str(catalog_db), read_only=True)
    inv = _inventory_for(con, model)
    expected: dict[str, int] = dropped_layer_params(inv)
    for t in logical_tensors(inv):
        role = inventory_role(t["name"])
        expected[role] = expected.get(role, 0) + math.prod(t["shape"])
    got = dict(
        con.execute("select role, params from params_by_role where model = ? and params > 0", [model]).fetchall()
    )
    assert got == expected


@pytest.mark.parametrize("model", MODELS)
def test_weight_tensor_count_equals_inventory(catalog_db, model):
    """Tensors per model (weights rows × copies) equal the checkpoint's tensor count."""
    con = duckdb.connect(str(catalog_db), read_only=True)
    inv = _inventory_for(con, model)
    (tensors,) = con.execute(
        "select sum(i.count) from weights w join instances i using (model, uid) where model = ?", [model]
    ).fetchone()
    assert tensors == len(expected_tensors(inv))


def expected_tensors(inv: dict) -> dict[str, list[int]]:
    """Checkpoint names and shapes: the inventory's logical tensors plus the dropped MTP layers
    (the last decoder layer's tensors re-indexed, and the MTP glue tensors)."""
    out = {t["name"]: list(t["shape"]) for t in logical_tensors(inv)}
    cfg = inv["config"]
    n_mtp = cfg.get("num_nextn_predict_layers", 0) if inv["ignored_on_load"] else 0
    d, vocab, n = cfg.get("hidden_size"), cfg.get("vocab_size"), cfg.get("num_hidden_layers")
    for k in range(n_mtp):
        prefix = f"model.layers.{n + k}."
        for t in logical_tensors(inv):
            if t["name"].startswith(f"model.layers.{n - 1}."):
                out[prefix + t["name"].removeprefix(f"model.layers.{n - 1}.")] = list(t["shape"])
        out |= {
            prefix + "embed_tokens.weight": [vocab, d],
            prefix + "enorm.weight": [d],
            prefix + "hnorm.weight": [d],
            prefix + "eh_proj.weight": [d, 2 * d],
            prefix + "shared_head.norm.weight": [d],
            prefix + "shared_head.head.weight": [vocab, d],
        }
    return out


def test_llama_8b_is_8_030_261_248(catalog_db):
    con = duckdb.connect(str(catalog_db), read_only=True)
    (params,) = con.execute("select params from model_summary where model = 'Meta-Llama-3.1-8B'").fetchone()
    assert params == 8_030_261_248


def test_active_params_of_moe_models(catalog_db):
    """Active = all non-expert params + top_k/n_experts of the expert params.
    Mixtral-8x7B: 32 layers × 2 of 8 experts × 3 × 4096 × 14336 = 11,274,289,152 expert params
    active; the rest (attention, norms, gate, embeddings) = 46,702,792,704 − 32·8·3·4096·14336
    (45,097,156,608) = 1,605,636,096.  Sum 12,879,925,248."""
    con = duckdb.connect(str(catalog_db), read_only=True)
    (active,) = con.execute("select active_params from model_summary where model = 'Mixtral-8x7B-v0.1'").fetchone()
    expert_all = 32 * 8 * 3 * 4096 * 14336
    assert active == (46_702_792_704 - expert_all) + expert_all * 2 // 8 == 12_879_925_248


@pytest.mark.parametrize("model", MODELS)
def test_weight_names_are_the_checkpoint_names(catalog_db, model):
    """Expanding each weight's {layer}/{expert} placeholders over the layer schedule and the
    expert count gives exactly the checkpoint tensor names, with the same shapes."""
    con = duckdb.connect(str(catalog_db), read_only=True)
    inv = _inventory_for(con, model)
    rows = con.execute(
        """
        select w.name, w.shape, n.stack, n.template, i.count
        from weights w
        join instances i using (model, uid)
        join (select distinct model, uid, stack, template from nodes) n using (model, uid)
        where model = ?
        """,
        [model],
    ).fetchall()
    schedule = con.execute("select stack, layer, template from layer_schedule where model = ?", [model]).fetchall()
    expected = expected_tensors(inv)
    got: dict[str, list[int]] = {}
    for name, shape, stack, template, count in rows:
        layers = [layer for st, layer, t in schedule if (st, t) == (stack, template)] if "{layer}" in name else [None]
        experts = range(count // len(layers)) if "{expert}" in name else [None]
        for layer in layers:
            for expert in experts:
                got[name.format(layer=layer, expert=expert)] = list(shape)
    assert got == expected
