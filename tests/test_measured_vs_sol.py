"""Measured kernels next to speed of light: kernel_signatures (per-device shapes read through
the layouts), measured_vs_sol (exact signature joins under the framework and envelope
policies), step_measured, the plan and ``archsql corpus vs-sol``.

The corpus is a small aiconfigurator-core tree written here in the wheel's layout and
imported through the project's own importer (tests/test_kernel_corpus_aiconfigurator.py
does the same), so every row passes the real ingest checks.

Ground truth, Meta-Llama-3.1-8B (config meta-llama/Meta-Llama-3.1-8B): hidden_size 4096,
num_attention_heads 32, num_key_value_heads 8, head_dim = 4096 / 32 = 128,
intermediate_size 14336, vocab_size 128256, num_hidden_layers 32.  The spec's GEMMs
(y[m, n] = x[m, k] · W[n, k]ᵀ, W as stored [out, in]):

    q_proj     n = 32 · 128 = 4096    k = 4096
    k_proj     n =  8 · 128 = 1024    k = 4096      (v_proj the same)
    o_proj     n = 4096               k = 32 · 128 = 4096
    gate_proj  n = 14336              k = 4096      (up_proj the same)
    down_proj  n = 4096               k = 14336
    lm_head    n = 128256             k = 4096

m = the tokens of the step: prefill of 2048 tokens for one request m = 2048 (lm_head: m = 1,
logits only for the last position of each request); decode at batch 1 m = 1, at batch 64
m = 64.  Each layer GEMM launches once per layer: 32 launches per step; lm_head once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import CorpusError
from archsql.kernel_corpus import import_aiconfigurator
from archsql.kernel_corpus.measured import measured_vs_sol
from archsql.kernel_corpus.plan import plan
from archsql.kernel_corpus.storage import VIEWS_DIR
from archsql.store import connect, freshness, keep_deployments, refresh_store
from archsql.views import check_invariants, view_docs

MODEL = "Meta-Llama-3.1-8B"
HIDDEN, HEADS, KV_HEADS, INTER, VOCAB, LAYERS = 4096, 32, 8, 14336, 128256, 32
HEAD_DIM = HIDDEN // HEADS  # 128
GEMMS = {  # uid -> (n, k) from the config, as derived in the module docstring
    "decoder/dense/self_attn.q_proj": (HEADS * HEAD_DIM, HIDDEN),
    "decoder/dense/self_attn.k_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
    "decoder/dense/self_attn.v_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
    "decoder/dense/self_attn.o_proj": (HIDDEN, HEADS * HEAD_DIM),
    "decoder/dense/mlp.gate_proj": (INTER, HIDDEN),
    "decoder/dense/mlp.up_proj": (INTER, HIDDEN),
    "decoder/dense/mlp.down_proj": (HIDDEN, INTER),
}
LM_HEAD = (VOCAB, HIDDEN)
M = {"prefill_2k": 2048, "decode_b1_c2k": 1, "decode_b64_c2k": 64}  # tokens of the step (batch · new tokens)
WORKLOADS = tuple(M)
ATTENTION = "decoder/dense/self_attn.scores"

# H200 SXM: 989e12 dense BF16 FLOP/s, 4.8e12 B/s HBM (archsql/gpus/gpus.csv)
PEAK, HBM = 989e12, 4.8e12


def gemm_ms(m: int, n: int, k: int, factor: float = 3.0) -> float:
    """A plausible time: `factor` × the GEMM's roofline bound (2·m·n·k FLOPs, BF16 operands
    and result read / written once), so the importer's MFU / MBU ≤ 1 checks keep the row."""
    bound_s = max(2.0 * m * n * k / PEAK, 2.0 * (m * k + n * k + m * n) / HBM)
    return round(factor * bound_s * 1e3, 6)


def _gemm(m: int, n: int, k: int, version: str, ms: float, dtype: str = "bfloat16", framework: str = "VLLM") -> dict:
    return {"framework": framework, "version": version, "device": "NVIDIA H200", "op_name": "gemm",
            "kernel_source": f"{framework.lower()}-gemm", "gemm_dtype": dtype, "m": m, "n": n, "k": k,
            "latency": ms}  # fmt: skip


def _attention(batch: int, isl: int, step: int, ms: float, kv_dtype: str = "bfloat16") -> dict:
    return {"framework": "VLLM", "version": "0.10.1", "device": "NVIDIA H200", "op_name": "attention",
            "kernel_source": "flash_attn", "batch_size": batch, "isl": isl, "num_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "beam_width": 1, "attn_dtype": "bfloat16",
            "kv_cache_dtype": kv_dtype, "step": step, "window_size": 0, "latency": ms}  # fmt: skip


def _write(root: Path, rel: str, rows: list[dict]) -> None:
    path = root / "aiconfigurator_core" / "systems" / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


# the newest vLLM version (0.10.1 > 0.9.2: a string comparison would get it wrong) holds every
# layer GEMM at every workload's m, exactly
NEWEST = {(m, n, k): gemm_ms(m, n, k) for m in M.values() for n, k in set(GEMMS.values())}
# the older version: the q / o shape at m = 1 faster than 0.10.1, and lm_head at m = 1
OLDER = {(1, 4096, 4096): gemm_ms(1, 4096, 4096, 2.0), (1, *LM_HEAD): gemm_ms(1, *LM_HEAD)}
SGLANG = {(64, 4096, 4096): gemm_ms(64, 4096, 4096, 1.5)}  # faster than vLLM's own
TP8_Q = (64, HEADS * HEAD_DIM // 8, HIDDEN)  # q_proj on one of 8 tensor-parallel ranks at batch 64
ATTENTION_MS = {"prefill_2k": 0.1, "decode_b1_c2k": 0.02, "decode_b64_c2k": 0.25}


@pytest.fixture(scope="module")
def db(store_of, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "aiconfigurator_core-0.12.0.dist-info").mkdir()
    _write(root, "h200_sxm/gemm/vllm/0.10.1/gemm_perf.parquet", [
        *(_gemm(*shape, "0.10.1", ms) for shape, ms in NEWEST.items()),
        _gemm(*TP8_Q, "0.10.1", gemm_ms(*TP8_Q)),
        _gemm(2047, 4096, 4096, "0.10.1", gemm_ms(2048, 4096, 4096, 1.5)),  # a neighbour of m = 2048, faster
        _gemm(1, 4097, 4096, "0.10.1", gemm_ms(1, 4097, 4096)),  # a shape Llama does not run
        _gemm(1, 4096, 4096, "0.10.1", gemm_ms(1, 4096, 4096, 1.1), dtype="fp8"),  # FP8: not a BF16 deployment's
    ])  # fmt: skip
    _write(root, "h200_sxm/gemm/vllm/0.9.2/gemm_perf.parquet", [_gemm(*s, "0.9.2", ms) for s, ms in OLDER.items()])
    _write(root, "h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet",
           [_gemm(*s, "0.5.14", ms, framework="SGLANG") for s, ms in SGLANG.items()])  # fmt: skip
    _write(
        root,
        "b200_sxm/gemm/vllm/0.10.1/gemm_perf.parquet",
        [_gemm(1, 4096, 4096, "0.10.1", gemm_ms(1, 4096, 4096, 1.8))],
    )  # another GPU
    # attention: kv_len = isl + step (aiconfigurator: step = the cached history)
    _write(root, "h200_sxm/attention/vllm/0.10.1/context_attention_perf.parquet",
           [_attention(1, 2048, 0, ATTENTION_MS["prefill_2k"])])  # fmt: skip
    _write(root, "h200_sxm/attention/vllm/0.10.1/generation_attention_perf.parquet", [
        _attention(1, 1, 2047, ATTENTION_MS["decode_b1_c2k"]),
        _attention(64, 1, 2047, ATTENTION_MS["decode_b64_c2k"]),
        _attention(64, 1, 2047, 0.2, kv_dtype="fp8"),  # an FP8 cache: not a BF16-cache deployment's
    ])  # fmt: skip
    path = tmp_path_factory.mktemp("store") / "store.duckdb"
    shutil.copy(store_of(MODEL), path)
    with duckdb.connect(str(path)) as con:  # the parameter tables are the user's: keep what the tests ask about
        keep_deployments(con, ["1xH200-single", "8xH200-tp8"])
        con.execute("delete from workloads where workload not in ('prefill_2k', 'decode_b1_c2k', 'decode_b64_c2k')")
    refresh_store(path)  # the tests read the derived rows of these deployments x workloads (store.connect)
    report = import_aiconfigurator(path, location=root)
    assert report.total("rows_rejected") == 0, [r.render() for r in report.sample]
    return path


def rows(db: Path, sql: str, *params) -> list[dict]:
    con = connect(db)
    try:
        return con.sql(sql, params=list(params) or None).to_arrow_table().to_pylist()
    finally:
        con.close()


def by_workload_uid(table) -> dict[tuple[str, str], dict]:
    return {(r["workload"], r["uid"]): r for r in table.to_pylist()}


def test_llama_on_one_h200_with_vllm_in_one_query(db):
    table = api.query(
        "select * from measured_vs_sol where model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single' "
        "and workload in ('prefill_2k', 'decode_b1_c2k', 'decode_b64_c2k') and framework = 'vllm'",
        db=db,
    )
    got = by_workload_uid(table)
    assert {w for w, _ in got} == set(WORKLOADS)
    for workload, m in M.items():
        for uid, (n, k) in GEMMS.items():
            r = got[(workload, uid)]
            assert (r["op_kind"], r["m"], r["n"], r["k"], r["dtype"]) == ("gemm", m, n, k, "bf16"), (workload, uid)
            assert r["status"] == "measured" and r["matched"]
            # the newest version's row, although 0.9.2 is faster for q / o at m = 1
            assert (r["library"], r["library_version"]) == ("vllm", "0.10.1")
            assert r["latency_us"] == pytest.approx(NEWEST[(m, n, k)] * 1e3)
            assert r["launches"] == LAYERS
            assert r["measured_s"] == pytest.approx(NEWEST[(m, n, k)] * 1e-3 * LAYERS)
            assert r["time_s"] == r["measured_s"]
            assert r["measured_over_sol"] == pytest.approx(r["measured_s"] / r["sol_s"])
        att = got[(workload, ATTENTION)]
        assert (att["op_kind"], att["heads"], att["kv_heads"], att["head_dim"]) == ("attention", 32, 8, 128)
        assert (att["batch"], att["q_len"], att["kv_len"]) == {
            "prefill_2k": (1, 2048, 2048),
            "decode_b1_c2k": (1, 1, 2048),
            "decode_b64_c2k": (64, 1, 2048),
        }[workload]
        # one flash kernel: score, softmax, apply; its SOL is theirs summed
        assert att["members"] == 3 and att["status"] == "measured" and att["kv_dtype"] == "bf16"
        assert att["latency_us"] == pytest.approx(ATTENTION_MS[workload] * 1e3)
    # lm_head: only 0.9.2 has (1, 128256, 4096); a GEMM has no phase, so prefill (m = 1) matches too
    for workload in ("prefill_2k", "decode_b1_c2k"):
        head = got[(workload, "lm_head")]
        assert (head["m"], head["n"], head["k"], head["launches"]) == (1, *LM_HEAD, 1)
        assert (head["status"], head["library_version"]) == ("measured", "0.9.2")
    head = got[("decode_b64_c2k", "lm_head")]
    assert (head["m"], head["status"], head["measured_s"]) == (64, "no measurement", None)
    assert head["time_s"] == head["sol_s"] > 0
    # ops the corpus keys but holds no row of keep SOL; ops it does not key say so
    norm = got[("decode_b1_c2k", "decoder/dense/input_layernorm")]
    assert (norm["op_kind"], norm["tokens"], norm["hidden"], norm["status"]) == ("rmsnorm", 1, 4096, "no measurement")
    assert got[("decode_b1_c2k", "decoder/dense/mlp.act")]["status"] == "no kernel signature"
    assert got[("decode_b1_c2k", "decoder/dense/self_attn.v_heads")]["status"] == "no work"  # a view
    assert not [key for key in got if "all_reduce" in key[1] and got[key]["op_kind"]]  # tp 1: no collective runs


def test_envelope_takes_the_fastest_correct_row_of_any_library(db):
    got = by_workload_uid(
        measured_vs_sol(db, MODEL, workloads=WORKLOADS, framework=None)  # None: the envelope
    )
    q = "decoder/dense/self_attn.q_proj"
    assert (got[("decode_b64_c2k", q)]["library"], got[("decode_b64_c2k", q)]["library_version"]) == (
        "sglang",
        "0.5.14",
    )
    assert got[("decode_b64_c2k", q)]["latency_us"] == pytest.approx(SGLANG[(64, 4096, 4096)] * 1e3)
    # m = 1: vLLM 0.9.2's row is the fastest BF16 H200 row (the FP8 and the B200 rows are other signatures)
    one = got[("decode_b1_c2k", q)]
    assert (one["library_version"], one["latency_us"]) == ("0.9.2", pytest.approx(OLDER[(1, 4096, 4096)] * 1e3))
    assert one["candidates"] == 2  # vllm 0.10.1 and 0.9.2
    # m = 2048: the exact row, never the faster neighbour at m = 2047 (no interpolation)
    assert got[("prefill_2k", q)]["latency_us"] == pytest.approx(NEWEST[(2048, 4096, 4096)] * 1e3)
    # the BF16 cache's row, not the faster FP8-cache row
    assert got[("decode_b64_c2k", ATTENTION)]["latency_us"] == pytest.approx(ATTENTION_MS["decode_b64_c2k"] * 1e3)
    assert {r["policy"] for r in got.values()} == {"envelope"}


def test_a_framework_without_the_signature_keeps_sol(db):
    got = by_workload_uid(measured_vs_sol(db, MODEL, workloads=["decode_b64_c2k"], framework="sglang"))
    assert got[("decode_b64_c2k", "decoder/dense/self_attn.q_proj")]["library"] == "sglang"
    k_proj = got[("decode_b64_c2k", "decoder/dense/self_attn.k_proj")]
    assert (k_proj["status"], k_proj["time_s"]) == ("no measurement", k_proj["sol_s"])


def test_step_measured_replaces_sol_by_the_measured_kernels(db):
    (step,) = measured_vs_sol(db, MODEL, workloads=["decode_b1_c2k"], framework="vllm", step=True).to_pylist()
    (sol,) = rows(db, "select * from step_sol where model = ? and deployment = ? and workload = ?",
                  MODEL, "1xH200-single", "decode_b1_c2k")  # fmt: skip
    kernels = rows(db, "select uid, sol_s from measured_vs_sol where model = ? and deployment = ? and "
                   "workload = ? and framework = 'vllm' and matched", MODEL, "1xH200-single", "decode_b1_c2k")  # fmt: skip
    # measured from the fixture: 7 layer GEMMs and attention, 32 launches each, and lm_head once
    measured = LAYERS * (sum(NEWEST[(1, n, k)] for n, k in GEMMS.values()) + ATTENTION_MS["decode_b1_c2k"])
    measured = (measured + OLDER[(1, *LM_HEAD)]) * 1e-3
    assert sorted(r["uid"] for r in kernels) == sorted([*GEMMS, ATTENTION, "lm_head"])
    assert step["kernels_measured"] == 9
    assert step["kernels_unmeasured"] == 3  # input / post-attention / final rmsnorm
    assert step["sol_s"] == pytest.approx(sol["time_s"])
    assert step["measured_s"] == pytest.approx(measured)
    assert step["time_s"] == pytest.approx(sol["time_s"] - sum(r["sol_s"] for r in kernels) + measured)
    assert step["tpot_s"] == step["time_s"] and step["ttft_s"] is None
    assert step["measured_share"] == pytest.approx(measured / step["time_s"])
    assert step["measured_with"] == "vllm 0.10.1, vllm 0.9.2"
    (prefill,) = measured_vs_sol(db, MODEL, workloads=["prefill_2k"], framework="vllm", step=True).to_pylist()
    assert prefill["ttft_s"] == prefill["time_s"] and prefill["tpot_s"] is None


def test_tensor_parallel_signatures_are_read_through_the_layouts(db):
    signatures = rows(
        db, "select * from kernel_signatures where model = ? and deployment = '8xH200-tp8' and workload = ?",
        MODEL, "decode_b64_c2k",
    )  # fmt: skip
    got = {r["uid"]: r for r in signatures}
    tp = 8
    # column-parallel projections split n (heads / the FFN width), row-parallel ones split k
    expected = {
        "decoder/dense/self_attn.q_proj": (64, HEADS * HEAD_DIM // tp, HIDDEN),  # 512
        "decoder/dense/self_attn.k_proj": (64, KV_HEADS * HEAD_DIM // tp, HIDDEN),  # one KV head each: 128
        "decoder/dense/self_attn.v_proj": (64, KV_HEADS * HEAD_DIM // tp, HIDDEN),
        "decoder/dense/self_attn.o_proj": (64, HIDDEN, HEADS * HEAD_DIM // tp),  # k = 512
        "decoder/dense/mlp.gate_proj": (64, INTER // tp, HIDDEN),  # 1792
        "decoder/dense/mlp.up_proj": (64, INTER // tp, HIDDEN),
        "decoder/dense/mlp.down_proj": (64, HIDDEN, INTER // tp),
    }
    for uid, mnk in expected.items():
        assert (got[uid]["m"], got[uid]["n"], got[uid]["k"]) == mnk, uid
    att = got[ATTENTION]
    assert (att["heads"], att["kv_heads"], att["head_dim"], att["tp"]) == (HEADS // tp, KV_HEADS // tp, 128, tp)
    # two all-reduces per layer of the residual's B·s·d_model BF16 values, over the 8 ranks, and
    # one after the vocab-parallel embedding (each rank looked up its vocab slice: the same
    # B·s·d_model message, once per step)
    reduces = {r["uid"]: r for r in got.values() if r["op_kind"] == "all_reduce"}
    assert len(reduces) == 3
    assert {(r["message_bytes"], r["group_size"], r["launches"]) for r in reduces.values()} == {
        (64 * HIDDEN * 2, tp, LAYERS),
        (64 * HIDDEN * 2, tp, 1),
    }
    assert reduces["embed_tokens#all_reduce[-1]"]["launches"] == 1
    # the 8 ranks sit on one node of 8 GPUs (int_deployment_links: members per node 8): a
    # count of nodes ceil(8 / 8) = 1, an integer (a DOUBLE members count once made it
    # (8 + 8 - 1) / 8 = 1.875, which no measured row's node count could equal)
    assert {r["nodes"] for r in reduces.values()} == {1}
    assert all(type(r["nodes"]) is int for r in reduces.values())
    # the plan is the same view, deduplicated
    planned = plan(MODEL, "decode_b64_c2k", "8xH200-tp8", db=db)
    gemms = {(s.get("m"), s.get("n"), s.get("k")): s.count for s in planned.shapes if s.op_kind == "gemm"}
    assert gemms == {
        (64, 512, HIDDEN): LAYERS,  # q_proj
        (64, 128, HIDDEN): 2 * LAYERS,  # k_proj, v_proj
        (64, HIDDEN, 512): LAYERS,  # o_proj
        (64, 1792, HIDDEN): 2 * LAYERS,  # gate_proj, up_proj
        (64, HIDDEN, 1792): LAYERS,  # down_proj
        (64, VOCAB // tp, HIDDEN): 1,  # lm_head: vocab-parallel, each rank its 128256 / 8 rows
    }
    # and the measured row of the per-device q_proj shape matches on the TP deployment
    (q,) = rows(db, "select * from measured_vs_sol where model = ? and deployment = '8xH200-tp8' and "
                "workload = 'decode_b64_c2k' and framework = 'vllm' and uid = ?", MODEL,
                "decoder/dense/self_attn.q_proj")  # fmt: skip
    assert (q["status"], q["latency_us"]) == ("measured", pytest.approx(gemm_ms(*TP8_Q) * 1e3))


MINE = ("base_shapes", "base_edges", "int_device_shapes", "int_node_kernels", "kernel_signatures", "kernel_plan")


def test_invariants_hold(db):
    """The sidecar invariants of the signature views, and of every corpus view, on a real model."""
    with connect(db) as con:  # the derived rows: equal to the live views' (tests/test_derived.py)
        assert freshness(con).fresh
        for view, doc in view_docs().items():
            if view in MINE:
                for inv in doc["invariants"]:
                    assert con.execute(inv["sql"]).fetchall() == [], f"{view}: {inv['description']}"
        assert check_invariants(con, VIEWS_DIR) == []


def test_bad_names_are_located_errors(db):
    with pytest.raises(CorpusError, match="unknown framework on H200 SXM 'vlm'") as info:
        measured_vs_sol(db, MODEL, framework="vlm")
    assert info.value.issues[0].hint == "did you mean 'vllm'?"
    with pytest.raises(CorpusError, match="did you mean 'decode_b64_c2k'"):
        measured_vs_sol(db, MODEL, workloads=["decode_b64_c2"], framework="vllm")
    with pytest.raises(CorpusError, match="did you mean '8xH200-tp8'"):
        plan(MODEL, "decode_b1_c2k", "8xH200-tp9", db=db)


def test_cli_vs_sol(db):
    runner = CliRunner()
    args = ["--db", str(db), "corpus", "vs-sol", MODEL, "--workload", "decode_b1_c2k"]
    result = runner.invoke(cli, [*args, "--framework", "vllm", "--format", "csv"])
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.startswith("model,deployment,gpu,workload,phase,policy,framework,uid,")
    q = next(line for line in lines if ",decoder/dense/self_attn.q_proj," in line)
    assert ",measured," in q and ",0.10.1," in q
    result = runner.invoke(cli, [*args, "--envelope", "--step"])
    assert result.exit_code == 0, result.output
    assert "decode_b1_c2k" in result.stdout
    result = runner.invoke(cli, args)
    assert result.exit_code == 2 and "--framework NAME" in result.output and "Traceback" not in result.output
    result = runner.invoke(cli, [*args, "--framework", "vlm"])
    assert result.exit_code != 0 and "did you mean 'vllm'" in result.output and "Traceback" not in result.output


def test_a_signature_field_is_one_registry_edit(db, tmp_path, monkeypatch):
    """Adding a field to an op kind's signature is one edit, of ``registry.OP_KINDS``: no view
    spells the field list.  kernel_plan groups by kernel_signatures' columns, and
    measured_vs_sol builds the join key of each op and measurement from the kind's
    ``kernel_op_kinds.signature`` (the table written from the registry)."""
    import dataclasses
    import shutil

    from archsql.kernel_corpus import registry, storage

    copy = tmp_path / "store.duckdb"
    shutil.copy(db, copy)
    shutil.copytree(storage.corpus_dir(db), storage.corpus_dir(copy))
    sql = (
        "select workload, status from measured_vs_sol where model = ? and deployment = '1xH200-single' "
        "and uid = 'lm_head' and policy = 'framework' and framework = 'vllm' order by workload"
    )
    before = {r["workload"]: r["status"] for r in rows(copy, sql, MODEL)}
    assert before["prefill_2k"] == "measured"  # a GEMM's signature has no phase: the row matches in prefill too

    # the registry edit: a GEMM is also keyed by its phase (the corpus's GEMM rows state none)
    gemm = dataclasses.replace(registry.OP_KIND["gemm"], signature=(*registry.OP_KIND["gemm"].match, "phase"))
    monkeypatch.setattr(registry, "OP_KINDS", tuple(gemm if k.name == "gemm" else k for k in registry.OP_KINDS))
    storage.open_corpus(copy).close()  # rewrites kernel_op_kinds from the registry, recreates the views

    after = {r["workload"]: r["status"] for r in rows(copy, sql, MODEL)}
    assert set(after) == set(before)
    assert set(after.values()) == {"no measurement"}
    sig = rows(copy, "select signature from kernel_op_kinds where op_kind = 'gemm'")[0]["signature"]
    assert sig[-1] == "phase"
