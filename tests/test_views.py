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
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from archsql import store
from archsql.errors import QueryError, SpecError, StoreError
from archsql.schema.tables import TABLES
from archsql.views import check_invariants, create_views, view_docs, view_files

TOY = "toy-moe"
LLAMA = "toy-llama-kv"
K = 1024


def _table(name: str, rows: list[tuple]) -> pa.Table:
    schema = TABLES[name]
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)


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
    phases = ("prefill", "decode")

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
                (m, uid, tensor, f"{n[2]}.{tensor}", shape, prod(shape))
                for uid, n in nodes.items()
                for tensor, shape in n[6]
            ],
        ),
        "instances": _table("instances", [(m, uid, n[7], n[8]) for uid, n in nodes.items()]),
        "terms": _table(
            "terms",
            [(m, ph, uid, "flops", coef, eb, es, ec) for ph in phases for uid, coef, eb, es, ec in terms[ph]],
        ),
        "caches": _table(
            "caches",
            [
                (m, "k_proj", "kv", "key", "per_token", 4),
                (m, "v_proj", "kv", "value", "per_token", 4),
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
                )
                for uid, _ in kv
            ],
        ),
        "instances": _table("instances", [(m, uid, 32, 32) for uid, _ in kv]),
        "caches": _table("caches", [(m, uid, "kv", kind, "per_token", 8 * 128) for uid, kind in kv]),
    }


def concat(*sets: dict[str, pa.Table]) -> dict[str, pa.Table]:
    names = {n for s in sets for n in s}
    return {n: pa.concat_tables([s[n] for s in sets if n in s]) for n in names}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "store.duckdb"
    store.write_store(path, concat(toy_tables(), llama_kv_tables()))
    con = store.connect(path)
    yield con
    con.close()


@pytest.fixture(scope="module")
def rw_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("rw") / "store.duckdb"
    store.write_store(path, toy_tables())
    con = store.connect(path, read_only=False)
    yield con
    con.close()


def rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_model_summary(db):
    got = rows(db, "select * from model_summary order by model")
    assert got == [
        (
            LLAMA,
            "meta-llama/Llama-3.1-8B",
            268435456,
            268435456,
            0,
            268435456,
            32,
            4096,
            None,
            131072,
        ),
        (TOY, "toy/moe", 2216, 1064, 256, 1960, 2, 8, 16, None),
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
        "select model, dtype, elements_per_token, bytes_per_token, cache_layers "
        "from kv_per_token where dtype in ('bf16', 'fp4') order by model, dtype",
    )
    assert got == [
        (LLAMA, "bf16", 65536, 131072.0, 32),
        (LLAMA, "fp4", 65536, 32768.0, 32),
        (TOY, "bf16", 16, 32.0, 2),
        (TOY, "fp4", 16, 8.0, 2),
    ]


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
    actual = [r[0] for r in db.execute(f'describe "{view}"').fetchall()]
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
