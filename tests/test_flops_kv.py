"""FLOPs and KV views against independent derivations and against the symbolic formula."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsql.api import catalog, formula
from archsql.schema.expr import RUNTIME_SYMBOLS
from archsql.store import connect

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
B, S, C, V = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c", "v"))
# v (image patches per request) is 0 for a workload without a workload_images row: text only

# Models whose mixers the config-generic derivations below do not cover; each is derived by
# hand, from its own config, in the named test file.
DERIVED_ELSEWHERE = {
    "Kimi-K3": "KDA state caches, attention-residual blocks and the vision tower: tests/test_families_kimi.py",
}


@pytest.fixture(scope="module")
def catalog_con(catalog_db):
    """One read-only connection to the catalog store for the per-model cases (opening one
    checks the derived tables' freshness: ~0.3 s, per case it was most of their time)."""
    con = connect(catalog_db)
    yield con
    con.close()


def _derived_elsewhere(model: str) -> None:
    if model in DERIVED_ELSEWHERE:
        pytest.skip(DERIVED_ELSEWHERE[model])


def test_kv_per_token_llama_8b_bf16(catalog_db):
    cfg = json.loads((CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]  # 4096 / 32 = 128
    # layers × KV heads × head dim × (K and V) × 2 bytes (bf16) = 32 × 8 × 128 × 2 × 2
    expected = cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2 * 2
    assert expected == 131_072
    con = connect(catalog_db)
    (got,) = con.execute(
        "select bytes_per_token from kv_per_token where model = 'Meta-Llama-3.1-8B' and dtype = 'bf16'"
    ).fetchone()
    assert got == expected


def _config(con, model: str) -> dict:
    (config_file,) = con.execute("select config_file from models where model = ?", [model]).fetchone()
    return json.loads((CONFIGS / config_file).read_text())


def _kv_per_token_per_layer(cfg: dict) -> int:
    """Cache elements one token adds to one layer, from the config alone.  MLA
    (kv_lora_rank set): one compressed latent plus one shared rope key, plus one DSA index
    key of index_head_dim when the layer has a lightning indexer (DeepSeek-V3.2, GLM-5);
    otherwise K (head_dim) and V (v_head_dim when the config sets it, else head_dim) of
    every KV head."""
    if cfg.get("kv_lora_rank"):
        return cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"] + cfg.get("index_head_dim", 0)
    head_dim = cfg.get("head_dim") or cfg.get("attention_head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg["num_key_value_heads"] * (head_dim + (cfg.get("v_head_dim") or head_dim))


ENCODER_MODEL_TYPES = ("bert",)


def _layer_kv(cfg: dict) -> list[tuple[int, int | None]]:
    """(cache elements one token adds, sliding window or None) of every cached layer.  A
    multimodal config describes its language model under text_config.  Hybrid sliding/full
    attention (MiMo-V2-Flash hybrid_layer_pattern: 1 = a window of sliding_window keys with
    swa_num_key_value_heads KV heads, 0 = full attention with num_key_value_heads)."""
    cfg = cfg.get("text_config") or cfg
    if cfg.get("model_type") in ENCODER_MODEL_TYPES:  # bidirectional encoders never decode: no cache
        return []
    mixers = _mixer_kinds(cfg)
    if mixers is not None:  # recurrent / hybrid models: only the attention layers keep K and V
        return [(_kv_per_token_per_layer(cfg), _sliding_window(cfg)) for kind in mixers if kind == "attention"]
    pattern = cfg.get("hybrid_layer_pattern")
    if pattern:
        swa = {**cfg, "num_key_value_heads": cfg["swa_num_key_value_heads"]}
        return [
            (_kv_per_token_per_layer(swa), cfg["sliding_window"]) if p == 1 else (_kv_per_token_per_layer(cfg), None)
            for p in pattern
        ]
    caps = _attention_caps(cfg)
    if caps is not None:  # sliding / chunked / full attention layers of one model
        full = _full_attention_config(cfg)
        return [(_kv_per_token_per_layer(full if cap is None else cfg), cap) for cap in caps]
    types = cfg.get("indexer_types")
    if types and "kv_lora_rank" in cfg:  # IndexShare (GLM-5.2): a "shared" layer has no indexer, no index keys
        shared = {**cfg, "index_head_dim": 0}
        return [(_kv_per_token_per_layer(cfg if kind == "full" else shared), None) for kind in types]
    return [(_kv_per_token_per_layer(cfg), _sliding_window(cfg))] * _cached_layers(cfg)


class Chunk(int):
    """A chunked layer's cap: attention_chunk_size positions per chunk.  The layer keeps the
    keys of the latest token's chunk, (c − 1) mod chunk + 1 positions (see _positions)."""


def _attention_caps(cfg: dict) -> list[int | None] | None:
    """Per-layer cap of models whose attention layers differ, as transformers builds
    config.layer_types: the config's own list (gpt-oss: sliding_attention → sliding_window
    keys, full_attention → none); Gemma-2 configs without one get the Gemma2Config default,
    "sliding_attention" where (i + 1) % 2 (even i); Llama-4 text configs get
    Llama4TextConfig's: no_rope_layers[i] = (i + 1) % no_rope_layer_interval != 0 (interval
    4 by default), "chunked_attention" on those RoPE layers (a Chunk of
    attention_chunk_size), "full_attention" on the NoPE ones.  None: every layer alike."""
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types")
    if types is None and cfg.get("model_type") == "gemma2":
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if types is None and cfg.get("model_type") == "llama4_text":
        interval = cfg.get("no_rope_layer_interval", 4)
        no_rope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
        types = ["chunked_attention" if r and cfg.get("attention_chunk_size") else "full_attention" for r in no_rope]
    if types is None or not set(types) <= {"sliding_attention", "full_attention", "chunked_attention"}:
        return None
    cap = {"sliding_attention": cfg.get("sliding_window"), "full_attention": None}
    return [Chunk(cfg["attention_chunk_size"]) if t == "chunked_attention" else cap[t] for t in types]


def _full_attention_config(cfg: dict) -> dict:
    """The config as a full-attention layer reads it (transformers Gemma4TextAttention):
    global_head_dim wide heads where the config sets it, and num_global_key_value_heads of
    them on attention_k_eq_v layers.  A k = v layer still caches keys (normed, rotated) and
    values (the same projection value-normed, not rotated): two tensors per head."""
    out = dict(cfg)
    if cfg.get("global_head_dim"):
        out["head_dim"] = cfg["global_head_dim"]
    if cfg.get("attention_k_eq_v") and cfg.get("num_global_key_value_heads"):
        out["num_key_value_heads"] = cfg["num_global_key_value_heads"]
    return out


def _positions(cap: int | None, context: int) -> int:
    """Positions one layer keeps at context c: c (no cap), min(c, window), or for a chunked
    layer the latest token's chunk, (c − 1) mod chunk + 1 — counted here from the start of
    that chunk (the last multiple of chunk below c, 0-based positions)."""
    if cap is None:
        return context
    if isinstance(cap, Chunk):
        return context - max(j for j in range(0, context, cap))  # keys since the chunk's start
    return min(context, cap)


def _mixer_kinds(cfg: dict) -> list[str | None] | None:
    """Token mixer of every decoder layer of a recurrent or hybrid model, read from the
    config's per-layer lists as transformers reads them: 'attention', 'gated_deltanet',
    'mamba2', 'mamba' (Mamba1), or None for a layer with no mixer (Nemotron-H "-" / "E"
    FFN layers).  None for a model with no recurrent layer."""
    if "linear_attention" in cfg.get("layer_types", []):  # Qwen3.5 / Qwen3-Next
        return ["gated_deltanet" if t == "linear_attention" else "attention" for t in cfg["layer_types"]]
    if "hybrid_override_pattern" in cfg:  # Nemotron-H: M Mamba2, * attention, - MLP, E MoE
        return [{"M": "mamba2", "*": "attention"}.get(ch) for ch in cfg["hybrid_override_pattern"]]
    if "attn_layer_period" in cfg:  # Jamba: attention where i % period == offset, Mamba elsewhere
        period, offset = cfg["attn_layer_period"], cfg["attn_layer_offset"]
        return ["attention" if i % period == offset else "mamba" for i in range(cfg["num_hidden_layers"])]
    if cfg.get("model_type") in ("mamba", "falcon_mamba"):
        return ["mamba"] * cfg["num_hidden_layers"]
    return None


def _mamba1_dims(cfg: dict) -> tuple[int, int, int]:
    """(inner width, state size, conv kernel) of a Mamba1 mixer: Jamba's mamba_expand ·
    hidden_size (its intermediate_size is the FFN's); FalconMamba's intermediate_size;
    MambaConfig's expand · hidden_size."""
    d = cfg["hidden_size"]
    inner = cfg["mamba_expand"] * d if "mamba_expand" in cfg else cfg.get("intermediate_size") or cfg["expand"] * d
    return inner, cfg.get("mamba_d_state") or cfg["state_size"], cfg.get("mamba_d_conv") or cfg["conv_kernel"]


def _layer_state_bytes(cfg: dict, act: int = 2) -> list[int]:
    """Fixed state bytes per request of every recurrent layer: the conv window in the act
    dtype (``act`` bytes), the scan's matrix state in FP32 (4 B) — SGLang
    ServerArgs.mamba_ssm_dtype "float32", vLLM's conv state in mamba_cache_dtype (model dtype).
    Same channels as _layer_states."""
    cfg = cfg.get("text_config") or cfg
    states = []
    for kind in _mixer_kinds(cfg) or []:
        if kind == "gated_deltanet":
            hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
            dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
            states.append((2 * hk * dk + hv * dv) * (cfg["linear_conv_kernel_dim"] - 1) * act + hv * dk * dv * 4)
        elif kind == "mamba2":
            inner, gn = cfg["mamba_num_heads"] * cfg["mamba_head_dim"], cfg["n_groups"] * cfg["ssm_state_size"]
            states.append((inner + 2 * gn) * (cfg["conv_kernel"] - 1) * act + inner * cfg["ssm_state_size"] * 4)
        elif kind == "mamba":
            inner, n, kernel = _mamba1_dims(cfg)
            states.append(inner * (kernel - 1) * act + inner * n * 4)
    return states


def _layer_states(cfg: dict) -> list[int]:
    """Fixed state elements per request of every recurrent layer: the causal conv keeps its
    last kernel − 1 inputs of every channel, the scan its matrix state.
    Gated DeltaNet: conv over q, k, v (2·Hk·dk + Hv·dv channels) + Hv·dk·dv.
    Mamba2: conv over x, B, C (H·P + 2·G·N channels) + H·P·N.  Mamba1: conv over D channels
    + D·N."""
    cfg = cfg.get("text_config") or cfg
    states = []
    for kind in _mixer_kinds(cfg) or []:
        if kind == "gated_deltanet":
            hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
            dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
            states.append((2 * hk * dk + hv * dv) * (cfg["linear_conv_kernel_dim"] - 1) + hv * dk * dv)
        elif kind == "mamba2":
            inner, gn = cfg["mamba_num_heads"] * cfg["mamba_head_dim"], cfg["n_groups"] * cfg["ssm_state_size"]
            states.append((inner + 2 * gn) * (cfg["conv_kernel"] - 1) + inner * cfg["ssm_state_size"])
        elif kind == "mamba":
            inner, n, kernel = _mamba1_dims(cfg)
            states.append(inner * (kernel - 1) + inner * n)
    return states


def _recurrent_flops_per_token(cfg: dict) -> int:
    """FLOPs of every recurrent scan for one token, in the recurrent form (see
    archsql/evaluator/primitives/recurrent.py for the per-element counts):
    gated delta rule Hv·(7·dk·dv + 2·dv + 10) + Hk·(7·dk + 2); Mamba2 5·H·P·N + 3·H·P + 6·H;
    Mamba1 8·D·N + 10·D (gated)."""
    cfg = cfg.get("text_config") or cfg
    total = 0
    for kind in _mixer_kinds(cfg) or []:
        if kind == "gated_deltanet":
            hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
            dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
            total += hv * (7 * dk * dv + 2 * dv + 10) + hk * (7 * dk + 2)
        elif kind == "mamba2":
            h, p, n = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"]
            total += 5 * h * p * n + 3 * h * p + 6 * h
        elif kind == "mamba":
            inner, n, _ = _mamba1_dims(cfg)
            total += 8 * inner * n + 10 * inner
    return total


def _recurrent_vector_params(cfg: dict) -> int:
    """Parameters of the recurrent mixers that are not matmul weights: the depthwise conv
    (channels × kernel, + channels with a bias), A_log, D, dt_bias and the gated norm.
    Gated DeltaNet (conv without bias): 2·Hk·dk + Hv·dv channels, A_log and dt_bias Hv,
    norm dv.  Mamba2: H·P + 2·G·N channels, A_log, D, dt_bias H each, norm H·P.
    Mamba1: D channels, A_log D·N, D D."""
    cfg = cfg.get("text_config") or cfg
    total = 0
    for kind in _mixer_kinds(cfg) or []:
        if kind == "gated_deltanet":
            hv, dv = cfg["linear_num_value_heads"], cfg["linear_value_head_dim"]
            channels = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"] + hv * dv
            total += channels * cfg["linear_conv_kernel_dim"] + 2 * hv + dv
        elif kind == "mamba2":
            h, inner = cfg["mamba_num_heads"], cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
            channels = inner + 2 * cfg["n_groups"] * cfg["ssm_state_size"]
            total += channels * (cfg["conv_kernel"] + int(cfg["use_conv_bias"])) + 3 * h + inner
        elif kind == "mamba":
            inner, n, kernel = _mamba1_dims(cfg)
            bias = cfg["mamba_conv_bias"] if "mamba_conv_bias" in cfg else cfg["use_conv_bias"]
            total += inner * (kernel + int(bias)) + inner * n + inner
    return total


def _cached_layers(cfg: dict) -> int:
    """Decoder layers.  DeepSeek's multi-token-prediction layers keep a cache of their own
    only when speculative decoding runs them; the base-model reports leave them out."""
    return cfg["num_hidden_layers"]


def _sliding_window(cfg: dict) -> int | None:
    """Keys a query sees, as transformers reads the config: Mistral applies sliding_window
    whenever it is set; Qwen2 only with use_sliding_window."""
    if cfg.get("use_sliding_window") is False:
        return None
    return cfg.get("sliding_window") or None


@pytest.mark.parametrize("model", catalog())
def test_kv_per_token_from_config(catalog_con, model):
    """Below every window each cached layer grows by its per-token elements; each recurrent
    layer holds its fixed state instead (0 per token)."""
    _derived_elsewhere(model)
    con = catalog_con
    layers = _layer_kv(_config(con, model))
    states = _layer_states(_config(con, model))
    got = con.execute(
        "select elements_per_token, state_elements_per_request, cache_layers from kv_per_token "
        "where model = ? and dtype = 'bf16'",
        [model],
    ).fetchone()
    assert got == (sum(elements for elements, _ in layers), sum(states), len(layers) + len(states))


def _dsa_decode_reads(cfg: dict, context: int) -> int | None:
    """Cache elements one DeepSeek-sparse-attention decode step reads per request at context
    c (None for a model without DSA): per layer, the attention reads only the min(c,
    index_topk) selected positions' latent and rope key, (kv_lora_rank + qk_rope_head_dim)
    each; a layer with its own lightning indexer also reads the index key of every position,
    index_head_dim × c (IndexShare, GLM-5.2: only the indexer_types "full" layers).  In bytes
    with a BF16 kv dtype: the latents 2 B each, the index keys FP8 + one FP32 scale per 128."""
    cfg = cfg.get("text_config") or cfg
    if not (cfg.get("index_topk") and cfg.get("kv_lora_rank")):
        return None
    types = cfg.get("indexer_types") or ["full"] * cfg["num_hidden_layers"]
    selected = min(context, cfg["index_topk"]) * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
    index_key = cfg["index_head_dim"] + cfg["index_head_dim"] // 128 * 4
    return sum(2 * selected + (index_key * context if kind == "full" else 0) for kind in types)


def _index_key_bytes_beyond_bf16(cfg: dict, context: int) -> int:
    """_layer_kv counts a DSA index key as index_head_dim elements at the row's 2 B; it is
    stored FP8 with one FP32 scale per 128 elements (DeepSeek-V3.2-Exp Indexer k_cache /
    k_scale_cache) whatever the kv dtype: the difference per request at context c, over the
    layers with their own indexer."""
    cfg = cfg.get("text_config") or cfg
    if not (cfg.get("index_topk") and cfg.get("kv_lora_rank")):
        return 0
    types = cfg.get("indexer_types") or ["full"] * cfg["num_hidden_layers"]
    index_key = cfg["index_head_dim"] + cfg["index_head_dim"] // 128 * 4
    return types.count("full") * context * (index_key - 2 * cfg["index_head_dim"])


@pytest.mark.parametrize("model", catalog())
def test_kv_per_request_from_config(catalog_con, model):
    """At every stored workload one request holds min(c, window) positions per layer (c
    without a window) plus every recurrent layer's fixed state, in bytes of a bf16 kv and act
    dtype (each cache in its own storage dtype: scan states FP32, DSA index keys FP8 + scale);
    a decode step reads exactly that — except under DeepSeek sparse attention, which reads only the
    selected positions' latents (_dsa_decode_reads)."""
    _derived_elsewhere(model)
    con = catalog_con
    layers = _layer_kv(_config(con, model))
    state = sum(_layer_state_bytes(_config(con, model)))  # conv in BF16 (act), scan state FP32
    got = con.execute(
        "select r.workload, r.phase, r.context, r.bytes_per_request, d.bytes_read_per_request "
        "from kv_per_request as r left join decode_cache_reads as d using (model, workload, dtype) "
        "where r.model = ? and r.dtype = 'bf16'",
        [model],
    ).fetchall()
    assert len(got) == 13
    for workload, phase, context, per_request, read in got:
        expected = state + sum(2 * elements * _positions(window, context) for elements, window in layers)
        expected += _index_key_bytes_beyond_bf16(_config(con, model), context)
        assert per_request == expected, workload
        dsa = _dsa_decode_reads(_config(con, model), context)
        reads = expected if dsa is None else dsa
        assert read == (reads if phase == "decode" else None), workload


@pytest.mark.parametrize("model", catalog())
def test_decode_flops_are_twice_the_active_matmul_params(catalog_con, model):
    """Independent check of the FLOP terms against the parameter counts (themselves checked
    against transformers' inventories): one decode token at c = 1 costs 2 FLOPs per active
    matmul weight, plus elementwise work (norms, activations, rope, residuals) that adds
    well under 1%, plus the recurrent scans of linear-attention / SSM layers, which are not
    matmuls with weights (derived from the config: _recurrent_flops_per_token).  The
    embedding table is a gather (no FLOPs); lm_head is a matmul even when tied."""
    _derived_elsewhere(model)
    con = catalog_con
    active, embedding = con.execute(
        "select s.active_params, r.params from model_summary s join params_by_role r using (model) "
        "where model = ? and r.role = 'embedding'",
        [model],
    ).fetchone()
    d_model, vocab = (
        con.execute("select value from dims where model = ? and dim = ?", [model, d]).fetchone()[0]
        for d in ("d_model", "vocab")
    )
    lm_head = con.execute(
        "select coalesce(sum(params), 0) from params_by_role where model = ? and role = 'lm_head'", [model]
    ).fetchone()[0]
    (heads,) = con.execute("select count(*) from nodes where model = ? and op = 'lm_head'", [model]).fetchone()
    lm_head_matmul = d_model * vocab if heads else 0  # an encoder (BERT) has no lm_head
    # a text token's decode step runs no vision tower (v = 0): its weights are not read
    (vision,) = con.execute(
        "select coalesce(sum(params), 0) from params_by_role where model = ? and role = 'vision'", [model]
    ).fetchone()
    matmul_params = (
        active - vision - embedding - lm_head + lm_head_matmul - _recurrent_vector_params(_config(con, model))
    )
    _, bound = formula(model, "flops", "decode")
    flops = float(bound.xreplace({B: 1, S: 1, C: 1, V: 0})) - _recurrent_flops_per_token(_config(con, model))
    assert 1.0 < flops / (2 * matmul_params) < 1.01


@pytest.fixture(scope="module")
def formula_db(catalog_db, tmp_path_factory):
    """A copy of the catalog store whose workloads each example replaces, and every model's
    bound FLOP formula per phase (evaluated once)."""
    db = tmp_path_factory.mktemp("prop") / "store.duckdb"
    shutil.copy(catalog_db, db)
    bound = {(m, phase): formula(m, "flops", phase)[1] for m in catalog() for phase in ("prefill", "decode")}
    return db, bound


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["prefill", "decode"]),
            st.integers(1, 512),  # batch
            st.integers(1, 131_072),  # new tokens (prefill)
            st.integers(0, 131_072),  # cached tokens before the step
        ),
        min_size=1,
        max_size=8,
    )
)
def test_view_equals_symbolic_formula(formula_db, rows):
    """For random workloads, the `flops` view equals the model's symbolic FLOP formula
    (the sympy expression the term rows came from) at the same binding."""
    db, bound = formula_db
    con = duckdb.connect(str(db))
    con.execute("delete from workloads")
    workloads = []
    for i, (phase, batch, s, prefix) in enumerate(rows):
        s = 1 if phase == "decode" else s
        workloads.append((f"w{i}", phase, batch, s, prefix + s))
    con.executemany("insert into workloads values (?, ?, ?, ?, ?)", workloads)
    got = {(m, w): f for m, w, f in con.execute("select model, workload, flops from flops").fetchall()}
    con.close()
    for model in catalog():
        for name, phase, batch, s, c in workloads:
            exact = bound[model, phase].xreplace(
                {B: sympy.Integer(batch), S: sympy.Integer(s), C: sympy.Integer(c), V: 0}
            )
            assert got[(model, name)] == pytest.approx(float(exact), rel=1e-12)
