"""Parameter counts against an independent oracle: transformers' own modules built on the
meta device (tests/fixtures/meta_inventories).  Difference must be exactly 0, in total and
per role, for every catalog model.

Two adjustments, both derived here from the inventory file and the config, never from the
engine: (1) quantization siblings the inventory lists where transformers applied the FP8
quantizer on meta (``*.weight_scale_inv``) are storage, not parameters (checkpoint
reconciliation checks them); (2) layers transformers drops on load (``ignored_on_load``,
the DeepSeek multi-token-prediction layer ``model.layers.{num_hidden_layers}``) are on disk
and in the spec, so their parameters are added: per MTP layer its own embedding and head
(2·vocab·d) where the checkpoint stores them (``mtp_own_embeddings``), enorm/hnorm/
shared_head.norm (3·d), eh_proj (2d·d), plus one decoder layer — the same tensors as the
inventory's last decoder layer (a MoE layer), with its own indexer where the config shares
indexers across layers (``mtp_decoder_layer``).  A spec that does not
model part of a checkpoint (Qwen3.5's vision tower) is compared on every other tensor; the
exclusion is listed in NOT_MODELED with the construct that is missing.

MXFP4 checkpoints (gpt-oss experts) store a parameter ``<p>`` as ``<p>_blocks`` (U8
[*lead, groups, 16]: 32 FP4 values per group, 2 per byte) plus ``<p>_scales`` (U8
[*lead, groups], one shared exponent per group).  The logical parameter is
``<p>`` [*lead, groups · 16 · 2]: its elements are twice the bytes of ``_blocks``; the scales
are storage, excluded like FP8's ``weight_scale_inv`` (reconciliation checks them).
Fused expert modules (gpt-oss, Llama-4) hold all experts of a layer in ONE tensor with a
leading experts axis; the spec's weights row for such a node has no ``{expert}``
placeholder and the per-expert shape, so the checkpoint tensor is [experts per layer,
*shape] (experts per layer = instance count / layers)."""

from __future__ import annotations

import json
import math
import re

import pytest

from archsql.api import catalog
from archsql.store import connect
from tests.conftest import FIXTURES, load_inventory

MODELS = catalog()


def inventory_role(name: str) -> str:
    """Role of a checkpoint tensor, read from its transformers module path only."""
    if "embed_tokens" in name or name == "backbone.embeddings.weight":
        return "embedding"
    if name.startswith(("lm_head", "language_model.lm_head")):
        return "lm_head"
    if name.startswith("model.visual."):  # Qwen3-VL's vision tower, its mergers and DeepStack mergers
        return "vision"
    if ".self_attn." in name:
        return "attention"
    if name.endswith(".layer_scalar"):  # Gemma-4: a learned scalar on each layer's residual output
        return "residual"
    if ".linear_attn." in name:  # gated DeltaNet (Qwen3.5)
        return "linear_attention"
    if ".mamba." in name:  # Jamba's Mamba mixer
        return "ssm"
    if ".mixer." in name:  # one-mixer blocks (Mamba, Nemotron-H): the mixer's kind from its module
        return MIXER_MODULE_ROLES.get(name.split(".mixer.")[1].split(".")[0], "ssm")
    if ".feed_forward." in name:  # Jamba, Llama-4
        return "ffn_moe" if any(k in name for k in (".experts.", ".router.", ".shared_expert.")) else "ffn"
    moe = (".block_sparse_moe.", ".mlp.experts.", ".mlp.gate.", ".mlp.shared_experts.", ".mlp.shared_expert.")
    moe += (".mlp.router.",)  # gpt-oss
    moe += (".router.", ".experts.")  # Gemma-4: the layer's own router.* and experts.* (beside its dense mlp.*)
    if any(k in name for k in moe) or ".mlp.shared_expert_gate." in name:
        return "ffn_moe"
    if ".mlp." in name:
        return "ffn"
    norms = ("model.norm.weight", "model.language_model.norm.weight", "language_model.model.norm.weight")
    if "layernorm" in name or name in norms:
        return "norm"
    if name == "backbone.norm_f.weight" or re.fullmatch(r"backbone\.layers\.\d+\.norm\.weight", name):
        return "norm"
    raise AssertionError(f"inventory tensor with no role mapping: {name}")


# a one-mixer block's mixer (backbone.layers.N.mixer.X): attention, FFN or MoE modules by
# name; any other module (in_proj, conv1d, x_proj, dt_proj, A_log, D, dt_bias, norm,
# out_proj) belongs to the Mamba / Mamba2 mixer
MIXER_MODULE_ROLES = {
    **dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "attention"),
    **dict.fromkeys(("up_proj", "down_proj"), "ffn"),
    **dict.fromkeys(("experts", "gate", "shared_experts"), "ffn_moe"),
}

QUANT_SIBLINGS = (".weight_scale_inv",)

# Checkpoint parts a catalog spec says it does not model (its doc names the missing
# construct): model → {tensor-name prefix: why}.  Every other tensor is compared exactly.
NOT_MODELED: dict[str, dict[str, str]] = {
    # Qwen3.5: the language model only; tests/test_families_recurrent.py derives the
    # excluded vision-tower count from vision_config and checks it equals these tensors
    **{
        model: {
            "model.visual.": "vision tower not written for Qwen3.5 yet (the image-patch input v and the "
            "Qwen3-VL vision components exist; the spec covers the language model)"
        }
        for model in ("Qwen3.5-27B", "Qwen3.5-35B-A3B", "Qwen3.5-397B-A17B")
    },
}


# Gemma-4: the language model only (Gemma4ForConditionalGeneration.model.language_model)
NOT_MODELED["gemma-4-26B-A4B"] = {
    "model.vision_tower.": "vision tower: no image-patch model input (a runtime size beyond B, s, c) yet",
    "model.embed_vision.": "projector of the vision features into the text embedding, which the spec has no input for",
}

# Llama-4: the language model only (Llama4ForConditionalGeneration.language_model)
NOT_MODELED |= {
    model: {
        "vision_model.": "vision tower: no image-patch model input (a runtime size beyond B, s, c), no "
        "pixel-shuffle token reshape, no learned positional/class-embedding parameter nodes yet",
        "multi_modal_projector.": "projector of the vision features, which the spec has no input for",
    }
    for model in ("Llama-4-Scout-17B-16E-Instruct", "Llama-4-Maverick-17B-128E-Instruct")
}

MXFP4_BLOCKS, MXFP4_SCALES = "_blocks", "_scales"


def _logical(t: dict, names: set[str]) -> dict | None:
    """The logical parameter of a checkpoint tensor (see module doc): an MXFP4 ``_blocks``
    tensor unpacked (2 FP4 values per byte), its ``_scales`` sibling dropped (None)."""
    name, shape = t["name"], list(t["shape"])
    if name.endswith(MXFP4_SCALES) and name.removesuffix(MXFP4_SCALES) + MXFP4_BLOCKS in names:
        return None
    if name.endswith(MXFP4_BLOCKS) and name.removesuffix(MXFP4_BLOCKS) + MXFP4_SCALES in names:
        return {**t, "name": name.removesuffix(MXFP4_BLOCKS), "shape": [*shape[:-2], shape[-2] * shape[-1] * 2]}
    return t


def _inventory_for(con, model: str) -> dict:
    (config_file,) = con.execute("select config_file from models where model = ?", [model]).fetchone()
    if not (FIXTURES / "meta_inventories" / config_file.replace(".json", ".json.gz")).is_file():
        pytest.skip(f"no meta inventory for {config_file} (all-MiniLM-L6-v2: checked against its real header instead)")
    inv = load_inventory(config_file)
    inv["config"] = json.loads((FIXTURES.parents[1] / "archsql" / "specs" / "configs" / config_file).read_text())
    inv["model"] = model
    return inv


# Inventories built from a trimmed config that lacks q_lora_rank, which transformers then
# filled with DeepseekV2Config's default (1536): the inventory has q_a_proj [1536, d],
# q_a_layernorm [1536] and q_b_proj [h·(nope+rope), 1536] in every layer, while the real
# checkpoint has no query bottleneck (DeepSeek's inference config_16B: q_lora_rank 0;
# DeepseekV2Attention with q_lora_rank None builds one q_proj [h·(nope+rope), d]).  Those
# three tensors are replaced by q_proj, its shape derived from the config.
NO_QUERY_LORA: dict[str, str] = {
    "DeepSeek-V2-Lite": "MLC preset deepseek_v2_lite drops q_lora_rank (shared/data/configs/SOURCES.md)",
}
QUERY_LORA_TENSORS = ("self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight", "self_attn.q_b_proj.weight")


def _without_query_lora(inv: dict, tensors: list[dict]) -> list[dict]:
    cfg = inv["config"]
    assert "q_lora_rank" not in cfg, "the config now states q_lora_rank: rebuild the inventory, drop NO_QUERY_LORA"
    q_proj = [cfg["num_attention_heads"] * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]), cfg["hidden_size"]]
    out = []
    for t in tensors:
        if t["name"].endswith(QUERY_LORA_TENSORS[0]):
            out.append({**t, "name": t["name"].removesuffix("q_a_proj.weight") + "q_proj.weight", "shape": q_proj})
        elif not t["name"].endswith(QUERY_LORA_TENSORS):
            out.append(t)
    return out


def logical_tensors(inv: dict) -> list[dict]:
    excluded = tuple(NOT_MODELED.get(inv.get("model"), {}))
    names = {t["name"] for t in inv["checkpoint_tensors"]}
    logical = (_logical(t, names) for t in inv["checkpoint_tensors"])
    out = [
        t
        for t in logical
        if t is not None
        and not t["name"].endswith(QUANT_SIBLINGS)
        and not (excluded and t["name"].startswith(excluded))
    ]
    return _without_query_lora(inv, out) if inv.get("model") in NO_QUERY_LORA else out


def mtp_module_tensors(inv: dict) -> dict[str, tuple[str, list[int]]]:
    """Qwen3.5's multi-token-prediction module, dropped on load (``^mtp.*``) when
    text_config.mtp_num_hidden_layers > 0 (vLLM Qwen3_5MultiTokenPredictor): mtp.fc [d, 2d]
    and mtp.pre_fc_norm_embedding / mtp.pre_fc_norm_hidden / mtp.norm [d] (role mtp), plus
    per MTP layer k the tensors of the inventory's last full-attention decoder layer under
    mtp.layers.{k}.; the embedding and head are the model's (mtp_use_dedicated_embeddings
    false).  name → (role, shape)."""
    text = inv["config"].get("text_config") or {}
    n_mtp = text.get("mtp_num_hidden_layers", 0) if "^mtp.*" in inv["ignored_on_load"] else 0
    if not n_mtp:
        return {}
    assert not text.get("mtp_use_dedicated_embeddings")
    d = text["hidden_size"]
    out = {"mtp.fc.weight": ("mtp", [d, 2 * d])}
    out |= {f"mtp.{norm}.weight": ("mtp", [d]) for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")}
    last = max(i for i, kind in enumerate(text["layer_types"]) if kind == "full_attention")
    source = f"model.language_model.layers.{last}."
    for k in range(n_mtp):
        for t in logical_tensors(inv):
            if t["name"].startswith(source):
                name = f"mtp.layers.{k}." + t["name"].removeprefix(source)
                out[name] = (inventory_role(name), list(t["shape"]))
    return out


# Which MTP layers store their own embed_tokens / shared_head.head, from public evidence:
# the checkpoint's own quantization manifest.  An FP8 checkpoint's config lists under
# quantization_config.modules_to_not_convert every module it keeps unquantized — norms,
# routers, the main model.embed_tokens and lm_head, and for the MTP layer its enorm, hnorm,
# eh_proj and shared_head.norm.  Embeddings and output heads are never FP8-quantized, so an
# MTP layer that stored model.layers.{n}.embed_tokens or .shared_head.head would be listed
# like model.embed_tokens and lm_head are.  GLM-5-FP8 and GLM-5.2-FP8 list neither (nor do
# GLM-5.1-FP8 and GLM-5.3-FP8 in shared/data/configs): GLM-5.x MTP layers share the model's
# embedding and head, as vLLM/SGLang's GLM MTP loaders and llama.cpp (GLM-4.6+: nextn
# embed_tokens / shared_head_head marked optional, ggml-org/llama.cpp#16359) also allow.
# DeepSeek-V3/R1/V3.2 (and GLM-4.7, no manifest in the fact folder) keep the default: the
# DeepSeek-V3 checkpoint stores model.layers.61.embed_tokens and shared_head.head.
# config file of the catalog model → FP8 sibling config (tests/fixtures/quant_configs)
MTP_MANIFESTS = {
    "zai-org__GLM-5.json": "zai-org__GLM-5-FP8.json",
    "zai-org__GLM-5.2.json": "zai-org__GLM-5.2-FP8.json",
}


def mtp_own_embeddings(inv: dict) -> bool:
    """True when the checkpoint's MTP layers store their own embed_tokens and
    shared_head.head (see MTP_MANIFESTS)."""
    manifest = MTP_MANIFESTS.get(inv["config_source"])
    if manifest is None:
        return True
    cfg = json.loads((FIXTURES / "quant_configs" / manifest).read_text())
    n = cfg["num_hidden_layers"]
    kept = set(cfg["quantization_config"]["modules_to_not_convert"])
    # the manifest does list the unquantized modules, the MTP layer's glue included
    assert {"model.embed_tokens", "lm_head", f"model.layers.{n}.enorm", f"model.layers.{n}.shared_head.norm"} <= kept
    own = {f"model.layers.{n}.embed_tokens", f"model.layers.{n}.shared_head.head"} & kept
    return bool(own)


def dropped_layer_params(inv: dict) -> dict[str, int]:
    """Per-role parameters of the MTP layers transformers drops on load (see module doc)."""
    qwen_mtp: dict[str, int] = {}
    for role, shape in mtp_module_tensors(inv).values():
        qwen_mtp[role] = qwen_mtp.get(role, 0) + math.prod(shape)
    if qwen_mtp:
        return qwen_mtp
    cfg = inv["config"]
    n_mtp = cfg.get("num_nextn_predict_layers", 0) if inv["ignored_on_load"] else 0
    if not n_mtp:
        return {}
    d, vocab = cfg["hidden_size"], cfg["vocab_size"]
    own = 2 * vocab * d if mtp_own_embeddings(inv) else 0  # embed_tokens + shared_head.head
    by_role = {"mtp": own + 3 * d + 2 * d * d}
    for name, shape in mtp_decoder_layer(inv).items():
        role = inventory_role(f"model.layers.0.{name}")
        by_role[role] = by_role.get(role, 0) + math.prod(shape)
    return {role: n * n_mtp for role, n in by_role.items()}


def mtp_decoder_layer(inv: dict) -> dict[str, list[int]]:
    """The decoder layer inside a DeepSeek-style MTP layer (names after ``model.layers.N.``):
    the inventory's last decoder layer.  Where the config lists per-layer indexer types
    (IndexShare, GLM-5.2: a "shared" layer has no indexer and reuses the latest "full"
    layer's top-k), the MTP layer runs its own indexer — its forward has no earlier layer to
    share with — so its indexer tensors are those of the last "full" layer."""
    cfg, tensors = inv["config"], logical_tensors(inv)
    last = cfg["num_hidden_layers"] - 1
    out = {
        t["name"].removeprefix(f"model.layers.{last}."): list(t["shape"])
        for t in tensors
        if t["name"].startswith(f"model.layers.{last}.")
    }
    types = cfg.get("indexer_types") or []
    if types and types[-1] != "full":
        full = max(i for i, kind in enumerate(types) if kind == "full")
        out |= {
            t["name"].removeprefix(f"model.layers.{full}."): list(t["shape"])
            for t in tensors
            if t["name"].startswith(f"model.layers.{full}.self_attn.indexer.")
        }
    return out


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
    con = connect(catalog_db)
    inv = _inventory_for(con, model)
    assert sum(math.prod(t["shape"]) for t in inv["checkpoint_tensors"]) == inv["num_checkpoint_elements"]
    expected = sum(math.prod(t["shape"]) for t in logical_tensors(inv)) + sum(dropped_layer_params(inv).values())
    (params,) = con.execute("select params from model_summary where model = ?", [model]).fetchone()
    assert params - expected == 0


@pytest.mark.parametrize("model", MODELS)
def test_params_by_role_equal_inventory(catalog_db, model):
    con = connect(catalog_db)
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
    """Tensors per model (weights rows × copies) equal the checkpoint's tensor count; a
    stacked expert tensor (no {expert} placeholder) is one tensor per layer for all its
    copies (see module doc)."""
    con = connect(catalog_db)
    inv = _inventory_for(con, model)
    (tensors,) = con.execute(
        """
        select sum(case when w.name like '%{expert}%' or coalesce(i.count = l.layers, true) then i.count else l.layers end)
        from weights w
        join instances i using (model, uid)
        join (select distinct model, uid, stack, template from nodes) n using (model, uid)
        left join (
            select model, stack, template, count(*) as layers from layer_schedule group by all
        ) l on l.model = n.model and l.stack = n.stack and l.template = n.template
        where model = ?
        """,
        [model],
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
        out |= {prefix + name: shape for name, shape in mtp_decoder_layer(inv).items()}
        out |= {
            prefix + "enorm.weight": [d],
            prefix + "hnorm.weight": [d],
            prefix + "eh_proj.weight": [d, 2 * d],
            prefix + "shared_head.norm.weight": [d],
        }
        if mtp_own_embeddings(inv):
            out |= {prefix + "embed_tokens.weight": [vocab, d], prefix + "shared_head.head.weight": [vocab, d]}
    return out | {name: shape for name, (_, shape) in mtp_module_tensors(inv).items()}


def test_llama_8b_is_8_030_261_248(catalog_db):
    con = connect(catalog_db)
    (params,) = con.execute("select params from model_summary where model = 'Meta-Llama-3.1-8B'").fetchone()
    assert params == 8_030_261_248


def test_active_params_of_moe_models(catalog_db):
    """Active = all non-expert params + top_k/n_experts of the expert params.
    Mixtral-8x7B: 32 layers × 2 of 8 experts × 3 × 4096 × 14336 = 11,274,289,152 expert params
    active; the rest (attention, norms, gate, embeddings) = 46,702,792,704 − 32·8·3·4096·14336
    (45,097,156,608) = 1,605,636,096.  Sum 12,879,925,248."""
    con = connect(catalog_db)
    (active,) = con.execute("select active_params from model_summary where model = 'Mixtral-8x7B-v0.1'").fetchone()
    expert_all = 32 * 8 * 3 * 4096 * 14336
    assert active == (46_702_792_704 - expert_all) + expert_all * 2 // 8 == 12_879_925_248


@pytest.mark.parametrize("model", MODELS)
def test_weight_names_are_the_checkpoint_names(catalog_db, model):
    """Expanding each weight's {layer}/{expert} placeholders over the layer schedule and the
    expert count gives exactly the checkpoint tensor names, with the same shapes."""
    con = connect(catalog_db)
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
        copies = count // len(layers)
        experts = range(copies) if "{expert}" in name else [None]
        stored = list(shape) if "{expert}" in name or copies == 1 else [copies, *shape]  # stacked experts
        for layer in layers:
            for expert in experts:
                got[name.format(layer=layer, expert=expert)] = stored
    assert got == expected
