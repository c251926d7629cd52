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

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))


def test_kv_per_token_llama_8b_bf16(catalog_db):
    cfg = json.loads((CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]  # 4096 / 32 = 128
    # layers × KV heads × head dim × (K and V) × 2 bytes (bf16) = 32 × 8 × 128 × 2 × 2
    expected = cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2 * 2
    assert expected == 131_072
    con = duckdb.connect(str(catalog_db), read_only=True)
    (got,) = con.execute(
        "select bytes_per_token from kv_per_token where model = 'Meta-Llama-3.1-8B' and dtype = 'bf16'"
    ).fetchone()
    assert got == expected


def _config(con, model: str) -> dict:
    (config_file,) = con.execute("select config_file from models where model = ?", [model]).fetchone()
    return json.loads((CONFIGS / config_file).read_text())


def _kv_per_token_per_layer(cfg: dict) -> int:
    """Cache elements one token adds to one layer, from the config alone.  MLA
    (kv_lora_rank set): one compressed latent plus one shared rope key; otherwise K and V
    of every KV head."""
    if cfg.get("kv_lora_rank"):
        return cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_key_value_heads"] * head_dim


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
def test_kv_per_token_from_config(catalog_db, model):
    """Below every window each cached layer grows by its per-token elements."""
    con = duckdb.connect(str(catalog_db), read_only=True)
    cfg = _config(con, model)
    expected = _kv_per_token_per_layer(cfg) * _cached_layers(cfg)
    got = con.execute(
        "select elements_per_token, state_elements_per_request, cache_layers from kv_per_token "
        "where model = ? and dtype = 'bf16'",
        [model],
    ).fetchone()
    assert got == (expected, 0, _cached_layers(cfg))


@pytest.mark.parametrize("model", catalog())
def test_kv_per_request_from_config(catalog_db, model):
    """At every stored workload one request holds min(c, window) positions per layer (c
    without a window), in bf16 bytes; a decode step reads exactly that."""
    con = duckdb.connect(str(catalog_db), read_only=True)
    cfg = _config(con, model)
    per_position = _kv_per_token_per_layer(cfg) * _cached_layers(cfg) * 2
    window = _sliding_window(cfg)
    got = con.execute(
        "select r.workload, r.phase, r.context, r.bytes_per_request, d.bytes_read_per_request "
        "from kv_per_request as r left join decode_cache_reads as d using (model, workload, dtype) "
        "where r.model = ? and r.dtype = 'bf16'",
        [model],
    ).fetchall()
    assert len(got) == 13
    for workload, phase, context, per_request, read in got:
        expected = per_position * (min(context, window) if window else context)
        assert per_request == expected, workload
        assert read == (expected if phase == "decode" else None), workload


@pytest.mark.parametrize("model", catalog())
def test_decode_flops_are_twice_the_active_matmul_params(catalog_db, model):
    """Independent check of the FLOP terms against the parameter counts (themselves checked
    against transformers' inventories): one decode token at c = 1 costs 2 FLOPs per active
    matmul weight, plus elementwise work (norms, activations, rope, residuals) that adds
    well under 1%.  The embedding table is a gather (no FLOPs); lm_head is a matmul even
    when tied."""
    con = duckdb.connect(str(catalog_db), read_only=True)
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
    matmul_params = active - embedding - lm_head + d_model * vocab
    _, bound = formula(model, "flops", "decode")
    flops = float(bound.xreplace({B: 1, S: 1, C: 1}))
    assert 1.0 < flops / (2 * matmul_params) < 1.01


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
def test_view_equals_symbolic_formula(catalog_db, tmp_path_factory, rows):
    """For random workloads, the `flops` view equals the model's symbolic FLOP formula
    (the sympy expression the term rows came from) at the same binding."""
    db = tmp_path_factory.mktemp("prop") / "store.duckdb"
    shutil.copy(catalog_db, db)
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
            _, bound = formula(model, "flops", phase)
            exact = bound.xreplace({B: sympy.Integer(batch), S: sympy.Integer(s), C: sympy.Integer(c)})
            assert got[(model, name)] == pytest.approx(float(exact), rel=1e-12)
