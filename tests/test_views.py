"""The SQL views against hand-built tables whose answers are derived in the comments.

Toy model ``toy-moe`` (2 layers, one stack ``layers``, one template ``dec``):
d_model 8, vocab 16, 2 query heads and 1 KV head of d_head 4, 4 routed experts (top-1) of
d_ff 12.  Per instance (× copies):

=================  =========  ==============  =====  ======  ==========================
node               role       weight elements count  active  flops per instance
=================  =========  ==============  =====  ======  ==========================
embed              embedding  16*8 = 128      1      1       —
norm (per layer)   norm       8               2      2       32·B·s
q_proj             attention  8*8 + bias 8=72 2      2       128·B·s
k_proj             attention  8*4 = 32        2      2       64·B·s    (cache key, 4/token)
v_proj             attention  8*4 = 32        2      2       64·B·s    (cache value, 4/token)
attn               attention  —               2      2       32·B·s·c − 16·B·s² + 16·B·s
o_proj             attention  8*8 = 64        2      2       128·B·s
experts            ffn_moe    2*8*12 = 192    8      2       96·B·s  (= 384·B·s × top_k/E)
final_norm         norm       8               1      1       32·B·s
lm_head            lm_head    8*16 = 128      1      1       prefill 256·B, decode 256·B·s
=================  =========  ==============  =====  ======  ==========================

params: embedding 128, norm 8*2+8 = 24, attention (72+32+32+64)*2 = 400,
ffn_moe 192*8 = 1536 (active 192*2 = 384), lm_head 128
→ total 2216, active 1064, embedding + lm_head 256, body 1960.

FLOPs (copies × per-instance terms; an expert instance sees top_k/E = 1/4 of the tokens):
B·s: 32*2 + 128*2 + 64*2 + 64*2 + 16*2 + 128*2 + 96*8 + 32 = 1664 (+ 256 in decode = 1920)
→ prefill = 1664·B·s + 256·B + 64·B·s·c − 32·B·s²
→ decode  = 1920·B·s + 64·B·s·c − 32·B·s²

KV per token: (4 + 4) elements × 2 layers = 16 elements; bf16 → 32 bytes, 2 cached layers.

Model ``toy-llama-kv`` is Llama-3.1-8B's KV cache only: 32 layers, k_proj and v_proj
caching 8 KV heads × 128 = 1024 elements per token each, weights 4096×1024 each
→ 2*1024*32 = 65536 elements/token = 131072 bytes in bf16; params 2*4194304*32 = 268435456.

Model ``toy-hybrid`` has one cache of every growth law and a sliding-window FLOP term:
4 layers of one stack ``layers``: layers 0-1 template ``local``, layer 2 ``comp``, layer 3
``ssm``; no weights.  Per instance (× copies):

=======  ========  =====  ==============================  ===================================
node     template  count  flops per instance              cache entries (elements, growth)
=======  ========  =====  ==============================  ===================================
attn     local     2      8·B·window_pairs(s, c, 4)       —
k_proj   local     2      —                               key 2, window 4
v_proj   local     2      —                               value 2, window 4
latent   comp      1      24·B·s                          latent 6, compressed ratio 4;
                                                          rope_key 1, per_token (same node)
mixer    ssm       1      16·B·s                          conv_state 10, state; ssm_state 32,
                                                          state (same node)
=======  ========  =====  ==============================  ===================================

The evaluator's cache_elements terms per node (the sum of its entries): k_proj and v_proj
2·B·min_c(4); latent 6·B·ceil_c_div(4) + 1·B·c; mixer (10 + 32)·B = 42·B.

window_pairs(s, c, 4) = Σ_{j=c−s+1}^{c} min(j, 4):
  decode c = 2: min(2, 4) = 2;  decode c = 10: min(10, 4) = 4;
  prefill s = 6, c = 6 (no prefix; mixed): 1 + 2 + 3 + 4 + 4 + 4 = 18;
  prefill s = 6, c = 10 (first query at j = 5 ≥ 4: all capped): 6·4 = 24.
FLOPs = 2·8·B·wp + 24·B·s + 16·B·s = 16·B·wp + 40·B·s:
  d_c2  (B 3, s 1, c 2):  16·3·2 + 40·3 = 96 + 120 = 216
  d_c10 (B 3, s 1, c 10): 16·3·4 + 120 = 192 + 120 = 312
  p_s6_c6  (B 2, s 6, c 6):  16·2·18 + 40·12 = 576 + 480 = 1056
  p_s6_c10 (B 2, s 6, c 10): 16·2·24 + 480 = 768 + 480 = 1248

Caches of one request at context c: local 2 layers × (key 2 + value 2) × min(c, 4)
= 8·min(c, 4); comp 6·ceil(c/4) + 1·c; ssm 10 + 32 = 42 at every c:
  c = 2:  16 + (6·1 + 2) + 42 = 66;   c = 6:  32 + (6·2 + 6) + 42 = 92;
  c = 10: 32 + (6·3 + 10) + 42 = 102 (compressed: ceil(10/4) = 3 positions).
× batch: d_c2 198, d_c10 306, p_s6_c6 184, p_s6_c10 204 elements (bf16: × 2 bytes).
Cache reads per instance (cache_read_elements terms): attn reads its layer's key and value,
(2 + 2)·B·min_c(4); latent reads every compressed latent, 6·B·ceil_c_div(4), but only the
rope keys of 2 selected positions, 1·B·min_c(2) (a top-k reader); mixer reads its state, 42·B.
A decode step at context c reads per request 8·min(c, 4) + 6·ceil(c/4) + min(c, 2) + 42:
  c = 2:  16 + 6 + 2 + 42 = 66 (the whole cache);  c = 10: 32 + 18 + 2 + 42 = 94 (< 102)
× batch 3: d_c2 198, d_c10 282 elements.
Per token below every window: key 2·2 + value 2·2 + latent 6/4 + rope_key 1 + state 0
= 10.5 elements (21 bytes bf16); fixed state 42 elements (84 bytes) per request; all 4
layers hold a cache.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from archsql import store
from archsql.errors import QueryError, SpecError, StoreError
from archsql.schema.tables import PARAMETER_KEYS, PARAMETER_TABLES, TABLES
from archsql.views import check_invariants, create_views, macro_files, view_docs, view_files

TOY = "toy-moe"
LLAMA = "toy-llama-kv"
HYBRID = "toy-hybrid"
K = 1024
PHASES = ("prefill", "decode")


def _table(name: str, rows: list[tuple]) -> pa.Table:
    schema = TABLES[name]
    # trailing columns a toy row leaves out (terms.port, layouts.segments, ...) are null
    pad = [(*r, *(None,) * (len(schema.names) - len(r))) for r in rows]
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in pad], schema=schema)


def toy_tables() -> dict[str, pa.Table]:
    m = TOY
    # fmt: off
    # uid: (stack, template, path, op, role, component, weights [(tensor, shape)], count, active)
    nodes = {
        "embed": (None, None, "model.embed_tokens", "embedding", "embedding", "embedding",
                  [("weight", [16, 8])], 1, 1),
        "norm": ("layers", "dec", "model.layers.{layer}.input_layernorm", "rmsnorm", "norm",
                 "rmsnorm", [("weight", [8])], 2, 2),
        "q_proj": ("layers", "dec", "model.layers.{layer}.self_attn.q_proj", "linear",
                   "attention", "gqa", [("weight", [8, 8]), ("bias", [8])], 2, 2),
        "k_proj": ("layers", "dec", "model.layers.{layer}.self_attn.k_proj", "linear",
                   "attention", "gqa", [("weight", [4, 8])], 2, 2),
        "v_proj": ("layers", "dec", "model.layers.{layer}.self_attn.v_proj", "linear",
                   "attention", "gqa", [("weight", [4, 8])], 2, 2),
        "attn": ("layers", "dec", "model.layers.{layer}.self_attn", "attention_score",
                 "attention", "gqa", [], 2, 2),
        "o_proj": ("layers", "dec", "model.layers.{layer}.self_attn.o_proj", "linear",
                   "attention", "gqa", [("weight", [8, 8])], 2, 2),
        "experts": ("layers", "dec", "model.layers.{layer}.mlp.experts.{expert}", "grouped_gemm",
                    "ffn_moe", "moe", [("up", [12, 8]), ("down", [8, 12])], 8, 2),
        "final_norm": (None, None, "model.norm", "rmsnorm", "norm", "rmsnorm",
                       [("weight", [8])], 1, 1),
        "lm_head": (None, None, "lm_head", "linear", "lm_head", "lm_head",
                    [("weight", [16, 8])], 1, 1),
    }
    # (uid, coef, e_B, e_s, e_c) per instance, same in both phases except lm_head
    common = [
        ("norm", 32.0, 1, 1, 0), ("q_proj", 128.0, 1, 1, 0), ("k_proj", 64.0, 1, 1, 0),
        ("v_proj", 64.0, 1, 1, 0), ("attn", 32.0, 1, 1, 1), ("attn", -16.0, 1, 2, 0),
        ("attn", 16.0, 1, 1, 0), ("o_proj", 128.0, 1, 1, 0), ("experts", 96.0, 1, 1, 0),
        ("final_norm", 32.0, 1, 1, 0),
    ]
    terms = {"prefill": [*common, ("lm_head", 256.0, 1, 0, 0)],
             "decode": [*common, ("lm_head", 256.0, 1, 1, 0)]}
    # fmt: on
    phases = PHASES

    def prod(shape: list[int]) -> int:
        out = 1
        for n in shape:
            out *= n
        return out

    return {
        "models": _table("models", [(m, "toy/moe", "toy.yaml", "toy.json", "0" * 64)]),
        "dims": _table(
            "dims",
            [
                (m, "d_model", 8, "config.hidden_size", "whole"),
                (m, "vocab", 16, "config.vocab_size", "whole"),
                (m, "n_heads", 2, "config.num_attention_heads", "head_count"),
            ],
        ),
        "stacks": _table("stacks", [(m, "layers", "decoder", 2, 0, "model.layers")]),
        "layer_schedule": _table("layer_schedule", [(m, "layers", i, "dec") for i in range(2)]),
        "nodes": _table(
            "nodes",
            [
                (m, ph, uid, st, tp, path, op, role, comp)
                for ph in phases
                for uid, (st, tp, path, op, role, comp, *_) in nodes.items()
            ],
        ),
        "weights": _table(
            "weights",
            [
                (m, uid, tensor, f"{n[2]}.{tensor}", shape, prod(shape), n[3] != "embedding")
                for uid, n in nodes.items()
                for tensor, shape in n[6]
            ],
        ),
        "instances": _table("instances", [(m, uid, n[7], n[8]) for uid, n in nodes.items()]),
        "terms": _table(
            "terms",
            [
                *(
                    (m, ph, uid, "flops", coef, eb, es, ec, "none", 0)
                    for ph in phases
                    for uid, coef, eb, es, ec in terms[ph]
                ),
                # the cache entries as the evaluator states them: 4·B·c per node
                *(
                    (m, ph, uid, "cache_elements", 4.0, 1, 0, 1, "none", 0)
                    for ph in phases
                    for uid in ("k_proj", "v_proj")
                ),
            ],
        ),
        "caches": _table(
            "caches",
            [
                (m, "k_proj", "kv", "key", "per_token", 4, None, None),
                (m, "v_proj", "kv", "value", "per_token", 4, None, None),
            ],
        ),
    }


def llama_kv_tables() -> dict[str, pa.Table]:
    m = LLAMA
    kv = [("k_proj", "key"), ("v_proj", "value")]
    return {
        "models": _table("models", [(m, "meta-llama/Llama-3.1-8B", "l.yaml", "l.json", "1" * 64)]),
        "dims": _table(
            "dims",
            [
                (m, "d_model", 4096, "config.hidden_size", "whole"),
                (m, "max_context", 131072, "config.max_position_embeddings", "whole"),
            ],
        ),
        "stacks": _table("stacks", [(m, "layers", "decoder", 32, 0, "model.layers")]),
        "layer_schedule": _table("layer_schedule", [(m, "layers", i, "dec") for i in range(32)]),
        "nodes": _table(
            "nodes",
            [
                (
                    m,
                    ph,
                    uid,
                    "layers",
                    "dec",
                    f"model.layers.{{layer}}.self_attn.{uid}",
                    "linear",
                    "attention",
                    "gqa",
                )
                for ph in ("prefill", "decode")
                for uid, _ in kv
            ],
        ),
        "weights": _table(
            "weights",
            [
                (
                    m,
                    uid,
                    "weight",
                    f"model.layers.{{layer}}.self_attn.{uid}.weight",
                    [1024, 4096],
                    4194304,
                    True,
                )
                for uid, _ in kv
            ],
        ),
        "instances": _table("instances", [(m, uid, 32, 32) for uid, _ in kv]),
        "terms": _table(
            "terms",
            [(m, ph, uid, "cache_elements", 1024.0, 1, 0, 1, "none", 0) for ph in PHASES for uid, _ in kv],
        ),
        "caches": _table("caches", [(m, uid, "kv", kind, "per_token", 8 * 128, None, None) for uid, kind in kv]),
    }


def hybrid_tables() -> dict[str, pa.Table]:
    """``toy-hybrid``: every growth law and a window_pairs FLOP term (see the module docstring)."""
    m = HYBRID
    templates = ["local", "local", "comp", "ssm"]
    # uid: (template, op, role, count)
    nodes = {
        "attn": ("local", "attention_score", "attention", 2),
        "k_proj": ("local", "linear", "attention", 2),
        "v_proj": ("local", "linear", "attention", 2),
        "latent": ("comp", "linear", "attention", 1),
        "mixer": ("ssm", "ssd_scan", "mixer", 1),  # a registered primitive: op_sol prices by its math_class
    }
    # per instance: (uid, quantity, coef, e_B, e_s, e_c, factor, factor_arg), both phases
    terms = [
        ("attn", "flops", 8.0, 1, 0, 0, "window_pairs", 4),
        ("latent", "flops", 24.0, 1, 1, 0, "none", 0),
        ("mixer", "flops", 16.0, 1, 1, 0, "none", 0),
        ("k_proj", "cache_elements", 2.0, 1, 0, 0, "min_c", 4),
        ("v_proj", "cache_elements", 2.0, 1, 0, 0, "min_c", 4),
        ("latent", "cache_elements", 6.0, 1, 0, 0, "ceil_c_div", 4),
        ("latent", "cache_elements", 1.0, 1, 0, 1, "none", 0),
        ("mixer", "cache_elements", 42.0, 1, 0, 0, "none", 0),  # conv_state 10 + ssm_state 32
        ("attn", "cache_read_elements", 4.0, 1, 0, 0, "min_c", 4),  # key 2 + value 2 within the window
        ("latent", "cache_read_elements", 6.0, 1, 0, 0, "ceil_c_div", 4),  # every compressed latent
        ("latent", "cache_read_elements", 1.0, 1, 0, 0, "min_c", 2),  # rope keys of the top-2 positions
        ("mixer", "cache_read_elements", 42.0, 1, 0, 0, "none", 0),  # the old state
    ]
    # (uid, cache, kind, growth, elements, window, ratio)
    caches = [
        ("k_proj", "kv", "key", "window", 2, 4, None),
        ("v_proj", "kv", "value", "window", 2, 4, None),
        ("latent", "kv", "latent", "compressed", 6, None, 4),
        ("latent", "kv", "rope_key", "per_token", 1, None, None),
        ("mixer", "ssm", "conv_state", "state", 10, None, None),
        ("mixer", "ssm", "ssm_state", "state", 32, None, None),
    ]
    return {
        "models": _table("models", [(m, "toy/hybrid", "hybrid.yaml", "hybrid.json", "3" * 64)]),
        "stacks": _table("stacks", [(m, "layers", "decoder", len(templates), 0, "model.layers")]),
        "layer_schedule": _table("layer_schedule", [(m, "layers", i, t) for i, t in enumerate(templates)]),
        "nodes": _table(
            "nodes",
            [
                (m, ph, uid, "layers", tp, f"model.layers.{{layer}}.{uid}", op, role, tp)
                for ph in PHASES
                for uid, (tp, op, role, _) in nodes.items()
            ],
        ),
        "instances": _table("instances", [(m, uid, n[3], n[3]) for uid, n in nodes.items()]),
        "terms": _table("terms", [(m, ph, *t) for ph in PHASES for t in terms]),
        "caches": _table("caches", [(m, *c) for c in caches]),
    }


HYBRID_WORKLOADS = [
    ("d_c2", "decode", 3, 1, 2),
    ("d_c10", "decode", 3, 1, 10),
    ("p_s6_c6", "prefill", 2, 6, 6),
    ("p_s6_c10", "prefill", 2, 6, 10),
]


def workloads_table(rows: list[tuple]) -> pa.Table:
    schema = PARAMETER_TABLES["workloads"]
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)


def concat(*sets: dict[str, pa.Table]) -> dict[str, pa.Table]:
    names = {n for s in sets for n in s}
    return {n: pa.concat_tables([s[n] for s in sets if n in s]) for n in names}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "store.duckdb"
    store.write_store(path, concat(toy_tables(), llama_kv_tables(), hybrid_tables()))
    con = store.connect(path)
    yield con
    con.close()


@pytest.fixture(scope="module")
def hybrid_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "store.duckdb"
    store.write_store(path, {**hybrid_tables(), "workloads": workloads_table(HYBRID_WORKLOADS)})
    con = store.connect(path)
    yield con
    con.close()


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory) -> Path:
    """The path of a store of the toy model, written once (a write refreshes every derived
    table: seconds); a test that writes to it copies it first (:func:`toy_copy`)."""
    path = tmp_path_factory.mktemp("toy") / "store.duckdb"
    store.write_store(path, toy_tables())
    return path


def toy_copy(toy_store: Path, path: Path) -> Path:
    """A private copy of the toy store at ``path``: as ``store.write_store(path, toy_tables())``."""
    shutil.copy(toy_store, path)
    return path


@pytest.fixture(scope="module")
def rw_db(toy_store, tmp_path_factory):
    path = toy_copy(toy_store, tmp_path_factory.mktemp("rw") / "store.duckdb")
    con = store.connect(path, read_only=False)
    yield con
    con.close()


def rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_model_summary(db):
    got = rows(db, "select * from model_summary order by model")
    assert got == [
        (HYBRID, "toy/hybrid", 0, 0, 0, 0, 0, 4, None, None, None),
        (
            LLAMA,
            "meta-llama/Llama-3.1-8B",
            268435456,
            268435456,
            0,
            268435456,
            0,
            32,
            4096,
            None,
            131072,
        ),
        (TOY, "toy/moe", 2216, 1064, 256, 1960, 0, 2, 8, 16, None),
    ]


def test_params_by_role(db):
    got = rows(
        db,
        f"select role, params, active_params, share_of_params from params_by_role where model = '{TOY}' order by role",
    )
    assert got == [
        ("attention", 400, 400, pytest.approx(400 / 2216)),
        ("embedding", 128, 128, pytest.approx(128 / 2216)),
        ("ffn_moe", 1536, 384, pytest.approx(1536 / 2216)),
        ("lm_head", 128, 128, pytest.approx(128 / 2216)),
        ("norm", 24, 24, pytest.approx(24 / 2216)),
    ]


def toy_flops(phase: str, b: int, s: int, c: int) -> int:
    if phase == "prefill":
        return 1664 * b * s + 256 * b + 64 * b * s * c - 32 * b * s * s
    return 1920 * b * s + 64 * b * s * c - 32 * b * s * s


def test_flops_every_workload(db):
    got = rows(
        db,
        "select workload, phase, batch, new_tokens, context, flops, "
        f"flops_per_new_token from flops where model = '{TOY}'",
    )
    workloads = rows(db, "select workload from workloads")
    assert len(got) == len(workloads) == 13
    for workload, phase, b, s, c, flops, per_token in got:
        assert flops == toy_flops(phase, b, s, c), workload
        assert per_token == pytest.approx(flops / (b * s))
    by_name = {r[0]: r[5] for r in got}
    # 1664*8192 + 256 + 32*8192^2 ; 64*(1920 + 64*32768 - 32)
    assert by_name["prefill_8k"] == 2_161_115_392
    assert by_name["decode_b64_c32k"] == 134_338_560


def test_flops_model_without_terms_is_zero(db):
    got = rows(db, f"select distinct flops from flops where model = '{LLAMA}'")
    assert got == [(0.0,)]


def test_kv_per_token(db):
    got = rows(
        db,
        "select model, dtype, elements_per_token, bytes_per_token, state_elements_per_request, "
        "state_bytes_per_request, cache_layers from kv_per_token where dtype in ('bf16', 'fp4') order by model, dtype",
    )
    assert got == [
        (HYBRID, "bf16", 10.5, 21.0, 42, 84.0, 4),
        (HYBRID, "fp4", 10.5, 5.25, 42, 21.0, 4),
        (LLAMA, "bf16", 65536, 131072.0, 0, 0.0, 32),
        (LLAMA, "fp4", 65536, 32768.0, 0, 0.0, 32),
        (TOY, "bf16", 16, 32.0, 0, 0.0, 2),
        (TOY, "fp4", 16, 8.0, 0, 0.0, 2),
    ]


def test_kv_per_token_by_kind(db):
    got = rows(
        db,
        "select template, kind, growth, layers, elements_per_token, bytes_per_token, state_elements_per_request "
        f"from kv_per_token_by_kind where model = '{HYBRID}' and dtype = 'bf16' order by template, kind",
    )
    assert got == [
        ("comp", "latent", "compressed", 1, 1.5, 3.0, 0),  # 6 elements per 4 tokens
        ("comp", "rope_key", "per_token", 1, 1.0, 2.0, 0),
        ("local", "key", "window", 2, 4.0, 8.0, 0),  # 2 elements × 2 layers, below the window
        ("local", "value", "window", 2, 4.0, 8.0, 0),
        ("ssm", "conv_state", "state", 1, 0.0, 0.0, 10),
        ("ssm", "ssm_state", "state", 1, 0.0, 0.0, 32),
    ]


def test_window_pairs_flops(hybrid_db):
    got = dict(rows(hybrid_db, "select workload, flops from flops"))
    assert got == {"d_c2": 216, "d_c10": 312, "p_s6_c6": 1056, "p_s6_c10": 1248}
    by_role = rows(hybrid_db, "select role, flops from flops_by_role where workload = 'p_s6_c6' order by role")
    assert by_role == [("attention", 16 * 2 * 18 + 24 * 12), ("mixer", 16 * 12)]


def test_kv_per_request_honors_growth_laws(hybrid_db):
    got = rows(
        hybrid_db,
        "select workload, phase, batch, context, elements, bytes, bytes_per_request "
        "from kv_per_request where dtype = 'bf16' order by workload",
    )
    assert got == [
        ("d_c10", "decode", 3, 10, 306, 612, 204),
        ("d_c2", "decode", 3, 2, 198, 396, 132),
        ("p_s6_c10", "prefill", 2, 10, 204, 408, 204),
        ("p_s6_c6", "prefill", 2, 6, 184, 368, 184),
    ]


def test_kv_by_layer_group(hybrid_db):
    sql = (
        "select template, kind, growth, layers, elements from kv_by_layer_group "
        "where workload = ? and dtype = 'bf16' order by template, kind"
    )
    # batch 3; window 4 caps the local layers, ceil(c/4) positions of the latent
    assert hybrid_db.execute(sql, ["d_c2"]).fetchall() == [
        ("comp", "latent", "compressed", 1, 18),  # 6 × ceil(2/4) = 6 × 1, × 3
        ("comp", "rope_key", "per_token", 1, 6),  # 1 × 2, × 3
        ("local", "key", "window", 2, 24),  # 2 × min(2, 4) × 2 layers, × 3
        ("local", "value", "window", 2, 24),
        ("ssm", "conv_state", "state", 1, 30),  # 10, × 3
        ("ssm", "ssm_state", "state", 1, 96),  # 32, × 3
    ]
    assert hybrid_db.execute(sql, ["d_c10"]).fetchall() == [
        ("comp", "latent", "compressed", 1, 54),  # 6 × ceil(10/4) = 6 × 3, × 3
        ("comp", "rope_key", "per_token", 1, 30),
        ("local", "key", "window", 2, 48),  # 2 × min(10, 4) × 2 layers, × 3: stopped at the window
        ("local", "value", "window", 2, 48),
        ("ssm", "conv_state", "state", 1, 30),  # constant in context
        ("ssm", "ssm_state", "state", 1, 96),
    ]


def test_decode_cache_reads(hybrid_db):
    got = rows(
        hybrid_db,
        "select workload, batch, context, elements_read, bytes_read, bytes_read_per_request "
        "from decode_cache_reads where dtype = 'bf16' order by workload",
    )
    # the cache_read_elements terms at the workload (module docstring): a top-k reader reads
    # fewer positions than the cache holds at c = 10, all of them at c = 2
    assert got == [("d_c10", 3, 10, 282, 564, 188), ("d_c2", 3, 2, 198, 396, 132)]


def test_hybrid_invariants_hold(hybrid_db):
    assert check_invariants(hybrid_db) == []


def test_cache_terms_disagreeing_with_caches_are_caught(tmp_path):
    """caches say the key is capped at 4 positions, the evaluator's terms say it grows per token."""
    tables = hybrid_tables()
    terms = tables["terms"].to_pylist()
    for row in terms:
        if row["uid"] == "k_proj" and row["quantity"] == "cache_elements":
            row.update(e_c=1, factor="none", factor_arg=0)
    tables["terms"] = pa.Table.from_pylist(terms, schema=TABLES["terms"])
    path = tmp_path / "s.duckdb"
    store.write_store(path, tables)
    con = store.connect(path)
    try:
        failures = {(view, name) for view, name, _ in check_invariants(con)}
    finally:
        con.close()
    assert ("int_cache_entries", "evaluator_terms_agree") in failures


def test_a_cache_read_twice_is_caught(tmp_path):
    """attn reads its layer's key and value twice (8 elements per kept position instead of
    2 + 2): a decode step would read more than the caches hold (d_c2: 16 + 16 extra)."""
    tables = hybrid_tables()
    terms = tables["terms"].to_pylist()
    for row in terms:
        if row["uid"] == "attn" and row["quantity"] == "cache_read_elements":
            row["coef"] = 8.0
    tables["terms"] = pa.Table.from_pylist(terms, schema=TABLES["terms"])
    path = tmp_path / "s.duckdb"
    store.write_store(path, {**tables, "workloads": workloads_table(HYBRID_WORKLOADS)})
    con = store.connect(path)
    try:
        failures = {(view, name) for view, name, _ in check_invariants(con) if view == "decode_cache_reads"}
    finally:
        con.close()
    # d_c2 per request: 2 layers × 8 × min(2, 4) + 6 + 2 + 42 = 82 read > 66 held
    assert failures == {("decode_cache_reads", "reads_at_most_the_cache_without_shared_caches")}


def test_default_parameter_tables(db):
    assert rows(db, "select batch, new_tokens, context from workloads where workload = 'decode_b64_c32k'") == [
        (64, 1, 32 * K)
    ]
    assert rows(
        db,
        "select phase, batch, new_tokens, context from workloads where workload = 'prefill_128k'",
    ) == [("prefill", 1, 128 * K, 128 * K)]
    assert dict(rows(db, "select dtype, bytes from dtypes")) == {
        "fp32": 4,
        "bf16": 2,
        "fp16": 2,
        "fp8": 1,
        "fp4": 0.5,
    }
    assert rows(db, "select archsql_version from store_meta") == [("0.1.0",)]


def _invariants():
    return [
        pytest.param(view, inv, id=f"{view}.{inv['name']}")
        for view, doc in view_docs().items()
        for inv in doc["invariants"]
    ]


@pytest.mark.parametrize(("view", "invariant"), _invariants())
def test_invariant(db, view, invariant):
    bad = db.execute(invariant["sql"]).fetchall()
    assert bad == [], f"{view}: {invariant['description']}"


def test_check_invariants_reports_nothing(db):
    assert check_invariants(db) == []


@pytest.mark.parametrize("view", [f.name for f in view_files()])
def test_columns_documented(db, view):
    # the columns DuckDB recorded when it created the view (a DESCRIBE would plan its chain)
    actual = [
        r[0]
        for r in db.execute(
            "select column_name from duckdb_columns() where database_name = current_database() "
            "and schema_name = 'main' and table_name = ? order by column_index",
            [view],
        ).fetchall()
    ]
    assert actual, f"no view {view}"
    documented = [c["name"] for c in view_docs()[view]["columns"]]
    assert documented == actual


def test_rewrite_replaces_only_that_model(tmp_path):
    path = tmp_path / "s.duckdb"
    store.write_store(path, concat(toy_tables(), llama_kv_tables()))
    changed = toy_tables()
    changed["models"] = _table("models", [(TOY, "toy/moe-v2", "toy.yaml", "toy.json", "2" * 64)])
    store.write_store(path, changed)
    con = store.connect(path)
    try:
        assert rows(con, "select model, hf_id, params from model_summary order by model") == [
            (LLAMA, "meta-llama/Llama-3.1-8B", 268435456),
            (TOY, "toy/moe-v2", 2216),
        ]
        assert rows(con, "select count(*) from store_meta") == [(2,)]
    finally:
        con.close()
    with pytest.raises(StoreError, match="already in the store"):
        store.write_store(path, toy_tables(), replace_models=False)


def test_user_workloads_are_kept(tmp_path):
    path = tmp_path / "s.duckdb"
    mine = pa.Table.from_pylist([{"workload": "mine", "phase": "decode", "batch": 2, "new_tokens": 1, "context": 10}])
    store.write_store(path, {**toy_tables(), "workloads": mine})
    store.write_store(path, toy_tables())  # a rebuild keeps the user's workloads
    con = store.connect(path)
    try:
        assert rows(con, "select workload, flops from flops") == [("mine", toy_flops("decode", 2, 1, 10))]
    finally:
        con.close()


def test_parameter_tables_refuse_a_row_given_twice(toy_store, tmp_path):
    """Every parameter table has its natural key: the README's example inserted twice is a
    constraint error, not a doubled row (and doubled results)."""
    import duckdb

    toy_copy(toy_store, tmp_path / "s.duckdb")
    con = duckdb.connect(str(tmp_path / "s.duckdb"))
    try:
        con.execute("insert into workloads values ('decode_b32_c32k', 'decode', 32, 1, 32768)")
        with pytest.raises(duckdb.ConstraintException, match="decode_b32_c32k"):
            con.execute("insert into workloads values ('decode_b32_c32k', 'decode', 32, 1, 32768)")
        con.execute("insert into workload_images values ('prefill_2k', 4096)")
        with pytest.raises(duckdb.ConstraintException):
            con.execute("insert into workload_images values ('prefill_2k', 1024)")
        with pytest.raises(duckdb.ConstraintException):
            con.execute("insert into deployment_mesh values ('8xH200-tp8', 'tp', 4)")
        for table, key in PARAMETER_KEYS.items():
            primary = con.execute(
                "select constraint_column_names from duckdb_constraints() "
                "where table_name = ? and constraint_type = 'PRIMARY KEY'",
                [table],
            ).fetchall()
            assert primary == [(list(key),)], table
    finally:
        con.close()


def test_write_store_names_the_repeated_key(tmp_path):
    twice = [{"workload": "mine", "phase": "decode", "batch": 2, "new_tokens": 1, "context": 10}] * 2
    with pytest.raises(StoreError, match=r"table 'workloads' repeats its primary key \(workload\)") as err:
        store.write_store(tmp_path / "s.duckdb", {**toy_tables(), "workloads": pa.Table.from_pylist(twice)})
    assert "key (workload) = ('mine') appears 2 times" in str(err.value)
    mesh = [{"deployment": "d", "axis": "tp", "degree": 2}, {"deployment": "d", "axis": "tp", "degree": 4}]
    with pytest.raises(StoreError, match=r"key \(deployment, axis\) = \('d', 'tp'\) appears 2 times"):
        store.write_store(tmp_path / "s.duckdb", {**toy_tables(), "deployment_mesh": pa.Table.from_pylist(mesh)})
    assert not (tmp_path / "s.duckdb").exists()  # refused before the store is opened


def test_a_store_of_the_old_deployments_layout_says_to_rebuild_and_the_build_migrates_it(toy_store, tmp_path):
    """The deployments table as archsql had it before the mesh rows (a `tp` column): a reader is
    told to build (never to delete the file: the table is the user's), and the build keeps its
    rows in the new layout, naming the column it dropped (tests/test_store_repair.py has the rest)."""
    import duckdb

    path = toy_copy(toy_store, tmp_path / "old.duckdb")
    con = duckdb.connect(str(path))
    con.execute("alter table deployments add column tp bigint")
    before = con.execute("select deployment from deployments order by 1").fetchall()
    con.close()
    with pytest.raises(StoreError, match=r"(?s)another table layout \(table 'deployments' has tp that this archsql"):
        store.connect(path)
    (note,) = store.write_store(path, toy_tables())
    assert note.startswith("table 'deployments' has tp that this archsql does not use: its rows were copied")
    with store.connect(path) as con:
        assert con.execute("select deployment from deployments order by 1").fetchall() == before


def test_missing_store(tmp_path):
    with pytest.raises(StoreError, match="archsql build"):
        store.connect(tmp_path / "nope.duckdb")


def test_store_without_tables(tmp_path):
    import duckdb

    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(StoreError, match=r"no archsql tables.*archsql build"):
        store.connect(path)


def test_table_not_matching_contract(tmp_path):
    bad = toy_tables()
    bad["instances"] = bad["instances"].drop_columns(["active_count"])
    with pytest.raises(StoreError, match=r"instances.*active_count"):
        store.write_store(tmp_path / "s.duckdb", bad)


def _views_dir(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        p = tmp_path / "views" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path / "views"


def test_unknown_column_is_located(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "base/bad.sql": "-- a view with a typo\nselect\n    model,\n    rol\nfrom nodes\n",
        },
    )
    with pytest.raises(QueryError) as info:
        create_views(rw_db, views)
    issue = info.value.issues[0]
    assert (issue.file, issue.line, issue.column) == (str(views / "base" / "bad.sql"), 4, 5)
    assert "rol" in str(info.value) and "bad.sql:4:5" in str(info.value)
    assert issue.hint == "did you mean 'role'?"


def test_unknown_column_of_qualified_table_is_located(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "int/int_x.sql": "with n as (select model, uid from base_nodes)\nselect n.model, n.nope from n\n",
        },
    )
    with pytest.raises(QueryError, match=r"int_x.sql:2:\d+"):
        create_views(rw_db, views)


def test_unknown_table_is_located(rw_db, tmp_path):
    views = _views_dir(tmp_path, {"base/bad.sql": "select model\nfrom  nodez\n"})
    with pytest.raises(QueryError, match=r"bad.sql:2:7.*unknown table or view 'nodez'") as info:
        create_views(rw_db, views)
    assert info.value.issues[0].hint == "did you mean 'nodes'?"


def test_views_created_in_dependency_order_and_cycles_rejected(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "int/a_second.sql": "select model from b_first\n",
            "int/b_first.sql": "select model from models\n",
        },
    )
    assert create_views(rw_db, views) == ["b_first", "a_second"]
    views = _views_dir(
        tmp_path / "cycle",
        {
            "int/a.sql": "select model from b\n",
            "int/b.sql": "select model from a\n",
        },
    )
    with pytest.raises(QueryError, match="cycle: a -> b -> a"):
        create_views(rw_db, views)


def test_duckdb_rejection_keeps_the_file_line(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {"base/bad.sql": "-- c\nselect model, count(*) as n\nfrom nodes group by model having n > nope\n"},
    )
    with pytest.raises(QueryError, match=r"bad.sql:3: DuckDB rejected"):
        create_views(rw_db, views)


def test_sidecar_checked(tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "base/a.sql": "select model from models\n",
            "base/a.yml": "description: x\ncolumns:\n  - {name: model, descripton: y, unit: null}\ninvariants: []\n",
            "base/b.sql": "select model from models\n",
        },
    )
    with pytest.raises(SpecError) as info:
        view_docs(views)
    text = str(info.value)
    assert "unknown key 'descripton'" in text and "did you mean 'description'?" in text
    assert "b.sql" in text and "no sidecar b.yml" in text


def test_sidecar_stored_is_optional_and_boolean(tmp_path):
    """`stored: false` keeps a private step out of the derived tables (archsql.store._transient);
    any other value is refused where it is written."""
    from archsql.views import unstored_views

    doc = "description: x\ncolumns:\n  - {name: model, description: y, unit: null}\ninvariants: []\n"
    files = {"base/a.sql": "select model from models\n", "base/a.yml": "stored: false\n" + doc}
    files |= {"base/b.sql": "select model from models\n", "base/b.yml": doc}
    views = _views_dir(tmp_path, files)
    assert set(view_docs(views)) == {"a", "b"} and unstored_views(views) == {"a"}
    (views / "base" / "b.yml").write_text("stored: 'no'\n" + doc)
    with pytest.raises(SpecError, match=r"b.yml.*stored must be true or false"):
        view_docs(views)


def test_macros_defined_once_and_created_in_order():
    assert [f.name for f in macro_files()] == [
        "max_degree",  # the 2^20 bound of a GPU count or degree (deployment_row_checks, int_deployment_axes)
        "window_pairs",
        "chunk_len",
        "chunk_pairs",
        "experts_touched",  # issue 12: the routed experts a step touches (one source with the corpus)
        "cache_element_bytes",  # issue 12: a cache's bytes per element under its storage rule
        "cache_storage_dtype",
        "ranks_touched",  # issue 12: the distinct expert-parallel ranks a token is sent to
        "term_factor",
        "term_value",
        "shard_local",
        "shard_divisor",
        "dominates",  # the Pareto rule of `sweep --pareto` and of the saved frontier queries
    ]
    # the term-evaluation expression is written once, in the term_value macro; terms meet
    # workloads in exactly two views: whole-model terms and per-device op terms
    assert not [f.name for f in view_files() if "term_factor(" in f.sql or "power(" in f.sql]
    evaluating = sorted(f.name for f in view_files() if "term_value(" in f.sql)
    assert evaluating == ["int_device_op_values", "int_workload_terms"]


def test_macro_created_before_views(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "macros/20_twice_plus_one.sql": "create or replace macro twice_plus_one(x) as twice(x) + 1;\n",
            "macros/10_twice.sql": "-- doubles\ncreate or replace macro twice(x) as 2 * x;\n",
            "base/b.sql": "select twice_plus_one(count(*)) as n from models\n",
        },
    )
    assert create_views(rw_db, views) == ["b"]
    assert rows(rw_db, "select n from b") == [(3,)]


def test_macro_rejected_by_duckdb_is_located(rw_db, tmp_path):
    views = _views_dir(
        tmp_path,
        {"macros/10_bad.sql": "-- a typo in a function name\ncreate or replace macro bad(x) as\n    lest(x, 1);\n"},
    )
    with pytest.raises(QueryError, match=r"10_bad.sql:3:5: DuckDB rejected the macro") as info:
        create_views(rw_db, views)
    assert "lest" in str(info.value) and 'Did you mean "least' in str(info.value)


def test_macro_file_names_checked(tmp_path):
    views = _views_dir(
        tmp_path,
        {
            "macros/10_one.sql": "create or replace macro other(x) as x;\n",
            "macros/two.sql": "create or replace macro two(x) as x;\n",
            "macros/30_three.sql": "select 3;\n",
        },
    )
    with pytest.raises(QueryError) as info:
        macro_files(views)
    text = str(info.value)
    assert "10_one.sql:1:25: the file defines macro 'other' but is named for 'one'" in text
    assert "two.sql" in text and "NN_<macro name>.sql" in text
    assert "30_three.sql:1" in text and "create or replace macro" in text


def test_macro_file_holds_one_statement(rw_db, tmp_path):
    views = _views_dir(tmp_path, {"macros/10_two.sql": "create or replace macro two(x) as 2;\ndrop table models;\n"})
    with pytest.raises(QueryError, match=r"10_two.sql: a macro file holds exactly one statement"):
        create_views(rw_db, views)
    assert rows(rw_db, "select count(*) from models") == [(1,)]


def test_only_base_views_read_tables():
    """int and reports views read the store's tables only through the base layer (issue 11)."""
    from sqlglot import exp

    from archsql.kernel_corpus import storage
    from archsql.kernel_corpus.schema import TABLES as CORPUS_TABLES
    from archsql.schema.tables import CHECKPOINT_TABLES
    from archsql.views import _parse

    tables = {*TABLES, *PARAMETER_TABLES, *CHECKPOINT_TABLES, *CORPUS_TABLES, "kernel_corpus"}
    tables |= {"kernel_op_kinds", "kernel_dtype_names"}
    offenders = []
    for views_dir in (None, storage.VIEWS_DIR):
        for f in view_files(views_dir):
            if f.layer == "base":
                continue
            tree = _parse(f)
            ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
            read = {t.name.lower() for t in tree.find_all(exp.Table)} - ctes
            offenders += [f"{f.name} reads {t}" for t in sorted(read & tables)]
    assert offenders == []
