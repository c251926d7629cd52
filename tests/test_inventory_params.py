"""Parameter counts against an independent oracle: transformers' own modules built on the
meta device (tests/fixtures/meta_inventories).  Difference must be exactly 0, in total and
per role, for every catalog model."""

from __future__ import annotations

import math

import duckdb
import pytest

from archsql.api import catalog
from tests.conftest import load_inventory

MODELS = catalog()


def inventory_role(name: str) -> str:
    """Role of a checkpoint tensor, read from its transformers module path only."""
    if "embed_tokens" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".self_attn." in name:
        return "attention"
    if ".block_sparse_moe." in name or ".mlp.experts." in name or name.endswith(".mlp.gate.weight"):
        return "ffn_moe"
    if ".mlp." in name:
        return "ffn"
    if "layernorm" in name or name == "model.norm.weight":
        return "norm"
    raise AssertionError(f"inventory tensor with no role mapping: {name}")


def _inventory_for(con, model: str) -> dict:
    (config_file,) = con.execute("select config_file from models where model = ?", [model]).fetchone()
    return load_inventory(config_file)


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
    expected = sum(math.prod(t["shape"]) for t in inv["checkpoint_tensors"])
    assert expected == inv["num_checkpoint_elements"]  # the oracle agrees with itself
    (params,) = con.execute("select params from model_summary where model = ?", [model]).fetchone()
    assert params - expected == 0


@pytest.mark.parametrize("model", MODELS)
def test_params_by_role_equal_inventory(catalog_db, model):
    con = duckdb.connect(str(catalog_db), read_only=True)
    inv = _inventory_for(con, model)
    expected: dict[str, int] = {}
    for t in inv["checkpoint_tensors"]:
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
    assert tensors == len(inv["checkpoint_tensors"])


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
        select w.name, w.shape, n.template, i.count
        from weights w
        join instances i using (model, uid)
        join (select distinct model, uid, template from nodes) n using (model, uid)
        where model = ?
        """,
        [model],
    ).fetchall()
    schedule = con.execute("select layer, template from layer_schedule where model = ?", [model]).fetchall()
    expected = {t["name"]: list(t["shape"]) for t in inv["checkpoint_tensors"]}
    got: dict[str, list[int]] = {}
    for name, shape, template, count in rows:
        layers = [layer for layer, t in schedule if t == template] if "{layer}" in name else [None]
        experts = range(count // len(layers)) if "{expert}" in name else [None]
        for layer in layers:
            for expert in experts:
                got[name.format(layer=layer, expert=expert)] = list(shape)
    assert got == expected
