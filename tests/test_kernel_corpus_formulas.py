"""Work formulas of every op kind (the kernel_* SQL macros, docs/kernel_corpus.md "Work
formulas"): hand-derived FLOPs, device-memory bytes and link bytes from explicit numbers,
and the rejection of rows whose implied MFU, MBU or link use exceeds 1.

GPU: H200 SXM (gpus.csv): 989e12 dense BF16 and 1978e12 FP8 FLOP/s, 4.8e12 B/s HBM,
450e9 B/s NVLink per direction.  Bytes: bf16 2, fp8 1, fp32 4.  P(s, c, w) below is the
number of causal (query, key) pairs of s new queries after c - s cached tokens when each
query sees at most w keys: sum over positions j = c - s + 1 .. c of min(j, w).
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archsql import api
from archsql.kernel_corpus import import_aiconfigurator, import_files, open_corpus
from archsql.kernel_corpus.registry import OP_KINDS

H200 = "H200 SXM"
KEPT_US = 10_000.0  # 10 ms: every kept row below stays far under the peaks
# fmt: off
COLUMNS = {
    "op_kind": pa.string(), "gpu": pa.string(), "library": pa.string(), "phase": pa.string(),
    "dtype": pa.string(), "weight_dtype": pa.string(), "kv_dtype": pa.string(), "routing": pa.string(),
    "gated": pa.bool_(), "latency_us": pa.float64(),
}
# fmt: on

# op kind -> (signature, FLOPs, HBM bytes, link bytes) with the derivation of each number.
# fmt: off
CASES: dict[str, tuple[dict, int | float | None, int | float | None, int | float | None]] = {
    # 4 operations per element (x², the sum, ·rsqrt, ·weight); x read, y written, weight read
    "rmsnorm": (
        {"dtype": "bf16", "tokens": 4096, "hidden": 4096},
        4 * 4096 * 4096,  # 67,108,864
        2 * (2 * 4096 * 4096 + 4096),  # 67,117,056
        None,
    ),
    # FP8 quantization of a 4096 × 7168 activation: one operation per element, the input
    # read once at >= 1 byte per element
    "quantize": ({"dtype": "fp8", "m": 4096, "k": 7168}, 4096 * 7168, 1 * 4096 * 7168, None),
    # hyper-connection mapping: >= one multiply-add per element, one stream in and one out
    "mhc": ({"dtype": "bf16", "tokens": 1024, "hidden": 7168}, 2 * 1024 * 7168, 2 * 2 * 1024 * 7168, None),
    # GDN conv of Qwen3.5-9B shape in decode: 2·16·128 + 32·128 = 8192 channels, width 4,
    # 256 requests: x in and y out (256 × 8192 bf16), the 8192 × 4 weights, and the
    # 3-step conv state per request read and written back
    "causal_conv1d": (
        {"dtype": "bf16", "phase": "decode", "batch": 256, "tokens": 256, "hidden": 8192, "conv_kernel": 4},
        2 * 256 * 8192 * 4,  # 16,777,216
        2 * (2 * 256 * 8192 + 8192 * 4) + 2 * 2 * 256 * 8192 * 3,  # 8,454,144 + 25,165,824 = 33,619,968
        None,
    ),
    # gated DeltaNet decode: 64 requests, 32 value heads / 16 key heads of 128, FP32 state
    # 128 × 128 per value head: 6 FLOPs per state element per token; q, k (16 heads), v, out
    # (32 heads) in bf16 plus gate and beta per value head, the state read and written
    "gdn": (
        {"dtype": "bf16", "kv_dtype": "fp32", "phase": "decode", "batch": 64, "q_len": 1, "tokens": 64,
         "heads": 32, "kv_heads": 16, "head_dim": 128, "v_head_dim": 128},
        6 * 64 * 32 * 128 * 128,  # 201,326,592
        2 * 64 * (2 * 16 * 128 + 2 * 32 * 128 + 32 + 32) + 2 * 4 * 64 * 32 * 128 * 128,  # 1,581,056 + 268,435,456
        None,
    ),
    # Kimi delta attention prefill, 2 × 1024 tokens, 32 heads of 128: its gate has one value
    # per key channel (32 · 128 per token); no earlier state to read in prefill
    "kda": (
        {"dtype": "bf16", "phase": "prefill", "batch": 2, "q_len": 1024, "tokens": 2048, "heads": 32,
         "kv_heads": 32, "head_dim": 128, "v_head_dim": 128},
        6 * 2048 * 32 * 128 * 128,  # 6,442,450,944
        2 * 2048 * (2 * 32 * 128 + 2 * 32 * 128 + 32 * 128 + 32),  # 2·2048·20,512 = 84,017,152
        None,
    ),
    # Mamba2 decode, 128 requests, 128 heads of 64, state 64 × 128 per head, 8 B/C groups:
    # 4 FLOPs per state element per token (x·Bᵀ update, h·C output); x, y, B, C, dt in bf16,
    # the bf16 state read and written
    "mamba2": (
        {"dtype": "bf16", "phase": "decode", "batch": 128, "q_len": 1, "tokens": 128, "heads": 128,
         "head_dim": 64, "state_dim": 128, "ssm_groups": 8},
        4 * 128 * 128 * 64 * 128,  # 536,870,912
        2 * 128 * (2 * 128 * 64 + 2 * 8 * 128 + 128) + 2 * 2 * 128 * 128 * 64 * 128,  # 4,751,360 + 536,870,912
        None,
    ),
    # fused MoE (dispatch + experts + combine) on one of 8 EP ranks: 16384 tokens before
    # routing, top-8 of 256 experts -> 16384 (token, expert) pairs on this rank, SwiGLU
    # 7168 -> 3072 (3 projections); FP8 weights of its 256/8 = 32 experts, pairs in and out
    "moe_module": (
        {"dtype": "fp8", "tokens": 16384, "hidden": 7168, "inter": 3072, "topk": 8, "experts": 256, "ep": 8,
         "tp": 1, "gated": True, "routing": "balanced"},
        2 * (16384 * 8 // 8) * 7168 * 3072 * 3,  # 2,164,663,517,184
        32 * 7168 * 3072 * 3 + 2 * 16384 * 7168,  # 2,113,929,216 + 234,881,024
        None,
    ),
    # DeepSeek-V3 MLA block, decode, 16 TP-local heads, 64 requests at 4096 tokens:
    # L = 512, R = 64, N = 128, V = 128, hidden 7168.  P(1, 4096, 4096) = 4096 pairs; the
    # absorbed core 2·64·16·4096·(2·512 + 64) = 9,126,805,504 is below the non-absorbed one
    # (4096·(128 + 64 + 128) + 4095 cached keys · 512 · 256 per head).  Projections per token:
    # kv_a 7168·576 + kv_b 16·512·256 + o 16·128·7168 = 20,905,984 weights, 2 FLOPs each.
    # Bytes: the FP8 latent cache 64·4096·576, the FP8 weights, the bf16 block input and output.
    "mla_module": (
        {"dtype": "bf16", "kv_dtype": "fp8", "weight_dtype": "fp8_block", "phase": "decode", "batch": 64,
         "q_len": 1, "kv_len": 4096, "heads": 16, "kv_lora_rank": 512, "rope_dim": 64, "head_dim": 128,
         "v_head_dim": 128, "hidden": 7168},
        2 * 64 * 16 * 4096 * 1088 + 2 * 64 * 1 * 20_905_984,  # 9,126,805,504 + 2,675,965,952
        64 * 4096 * 576 + 20_905_984 + 2 * 2 * 64 * 7168,  # 150,994,944 + 20,905,984 + 1,835,008
        None,
    ),
    # GLM-5 DSA block, prefill of 4096 tokens, 64 heads: L 512, R 64, N 192, V 256, top-2048,
    # hidden 6144.  Pk = P(4096, 4096, 2048) = 2048·2049/2 + (4096 - 2048)·2048 = 6,292,480;
    # no cached keys (U = 0), so the non-absorbed core (192 + 64 + 256 = 512 per pair) is the
    # lesser.  Projections per token: 6144·576 + 64·512·448 + 64·256·6144 = 118,882,304.
    # Bytes: 4096 latent entries written, bf16 weights, the block's input and output.
    "dsa_module": (
        {"dtype": "bf16", "phase": "prefill", "batch": 1, "q_len": 4096, "kv_len": 4096, "heads": 64,
         "kv_lora_rank": 512, "rope_dim": 64, "head_dim": 192, "v_head_dim": 256, "index_topk": 2048,
         "hidden": 6144},
        2 * 64 * 6_292_480 * 512 + 2 * 4096 * 118_882_304,  # 412,383,969,280 + 973,883,834,368
        2 * 4096 * 576 + 2 * 118_882_304 + 2 * 2 * 4096 * 6144,  # 4,718,592 + 237,764,608 + 100,663,296
        None,
    ),
    # MiniMax-M3 sparse block, decode, 32 requests at 8192 tokens, 64 heads / 4 KV heads of
    # 128, 16 blocks of 128 = 2048 keys per query (Pk = 2048), hidden 6144: q, k, v, o
    # projections 6144·128·(2·64 + 2·4) weights; the 2048 selected entries of 4 KV heads
    "msa_module": (
        {"dtype": "bf16", "phase": "decode", "batch": 32, "q_len": 1, "kv_len": 8192, "heads": 64,
         "kv_heads": 4, "head_dim": 128, "index_topk": 2048, "hidden": 6144},
        2 * 32 * 64 * 256 * 2048 + 2 * 32 * 6144 * 128 * 136,  # 2,147,483,648 + 6,845,104,128
        2 * 32 * 4 * 2048 * 256 + 2 * 6144 * 128 * 136 + 2 * 2 * 32 * 6144,  # 134,217,728 + 213,909,504 + 786,432
        None,
    ),
    # GLM-5 sparse FlashMLA, decode, 64 requests at 10240 tokens, 64 heads, top-2048:
    # absorbed width 2·512 + 64 = 1088 per pair; q (576) and out (512) in bf16, 2048 FP8
    # latent entries per request
    "dsa_attn": (
        {"dtype": "bf16", "kv_dtype": "fp8", "phase": "decode", "batch": 64, "q_len": 1, "kv_len": 10240,
         "heads": 64, "kv_lora_rank": 512, "rope_dim": 64, "index_topk": 2048},
        2 * 64 * 64 * 1088 * 2048,  # 18,253,611,008
        2 * 64 * 64 * 1088 + 64 * 2048 * 576,  # 8,912,896 + 75,497,472
        None,
    ),
    # DeepSeek-V4 HCA core, decode, 16 requests at 16384 tokens, 64 heads of 512: the
    # 128-token window plus 16384 // 128 = 128 compressed entries = 256 keys per query
    "dsv4_hca_attn": (
        {"dtype": "bf16", "kv_dtype": "fp8", "phase": "decode", "batch": 16, "q_len": 1, "kv_len": 16384,
         "heads": 64, "head_dim": 512, "v_head_dim": 512, "window_size": 128, "compress_ratio": 128},
        2 * 16 * 64 * 1024 * 256,  # 536,870,912
        16 * 512 * 256 + 2 * 16 * 64 * 1024,  # 2,097,152 + 2,097,152
        None,
    ),
    # DeepSeek-V4 CSA block, decode, 8 requests at 8192 tokens: the 128-token window plus
    # min(top-512, 8192 // 4 = 2048) = 512 compressed entries; block input and output 4096 wide
    "dsv4_csa_module": (
        {"dtype": "bf16", "kv_dtype": "fp8", "phase": "decode", "batch": 8, "q_len": 1, "kv_len": 8192,
         "heads": 64, "head_dim": 512, "v_head_dim": 512, "window_size": 128, "compress_ratio": 4,
         "index_topk": 512, "hidden": 4096},
        2 * 8 * 64 * 1024 * (128 + 512),  # 671,088,640
        8 * 512 * (128 + 512) + 2 * 2 * 8 * 4096,  # 2,621,440 + 131,072
        None,
    ),
    # DeepSeek-V4 HCA block (every compressed entry): decode at 1024 tokens, ratio 128:
    # 128 window keys + 1024 // 128 = 8 compressed
    "dsv4_hca_module": (
        {"dtype": "bf16", "kv_dtype": "fp8", "phase": "decode", "batch": 4, "q_len": 1, "kv_len": 1024,
         "heads": 64, "head_dim": 512, "v_head_dim": 512, "window_size": 128, "compress_ratio": 128,
         "index_topk": 512, "hidden": 4096},
        2 * 4 * 64 * 1024 * (128 + 8),  # 71,303,168
        4 * 512 * (128 + 8) + 2 * 2 * 4 * 4096,  # 278,528 + 65,536
        None,
    ),
    # GLM-5 indexer logits, prefill of 2048 tokens: 32 index heads of 128 over the causal
    # triangle 2048·2049/2 = 2,098,176 pairs; FP8 q and keys, FP32 logits written
    "mqa_logits": (
        {"dtype": "fp8", "kv_dtype": "fp8", "phase": "prefill", "batch": 1, "q_len": 2048, "kv_len": 2048,
         "heads": 32, "head_dim": 128, "compress_ratio": 1},
        2 * 32 * 128 * 2_098_176,  # 17,188,257,792
        2048 * 32 * 128 + 2048 * 128 + 4 * 2_098_176,  # 8,388,608 + 262,144 + 8,392,704
        None,
    ),
    # top-512 over the ratio-4 compressed logits of a 4096-token prefill: position j sees
    # j // 4 entries, sum over j = 1..4096 = 4·1024·1023/2 + 1024 = 2,096,128 FP32 scores read;
    # 4096 × min(512, 1024) int32 indices written.  No FLOP formula (a selection).
    "sparse_topk": (
        {"dtype": "fp8", "phase": "prefill", "batch": 1, "q_len": 4096, "kv_len": 4096, "heads": 64,
         "compress_ratio": 4, "index_topk": 512},
        None,
        4 * (2_096_128 + 4096 * 512),  # 16,773,120
        None,
    ),
    # DeepEP dispatch on one of 8 ranks (one node): 128 tokens of 7168 bf16, top-8.  A given
    # other rank misses all 8 picks with probability (7/8)^8, so each token goes to
    # 7·(1 - (7/8)^8) other ranks on average: 2·128·7168·7·(1 - 5,764,801/16,777,216)
    "moe_dispatch": (
        {"dtype": "bf16", "tokens": 128, "hidden": 7168, "topk": 8, "experts": 256, "ep": 8, "nodes": 1},
        None,
        2 * 128 * 7168,  # the rank's tokens read: 1,835,008
        2 * 128 * 7168 * 7 * (16_777_216 - 5_764_801) / 16_777_216,  # 12,845,056 · 11,012,415 / 2^24
    ),
    # the expert ids of 128 tokens, top-8, int32
    "moe_a2a_prepare": ({"dtype": "bf16", "tokens": 128, "hidden": 7168, "topk": 8, "experts": 256, "ep": 8},
                        None, 4 * 128 * 8, None),
}
# Kinds whose formulas predate this file, tested with hand-derived numbers in
# test_kernel_corpus.py and test_kernel_corpus_aiconfigurator.py; here only present.
EARLIER = {
    "gemm": {"dtype": "bf16", "m": 64, "n": 64, "k": 64},
    "grouped_gemm": {"dtype": "bf16", "tokens": 64, "experts": 8, "topk": 2, "n": 64, "k": 64},
    "moe": {"dtype": "bf16", "tokens": 64, "hidden": 64, "inter": 64, "topk": 2, "experts": 8},
    "mlp": {"dtype": "bf16", "tokens": 64, "hidden": 64, "inter": 64},
    "attention": {"dtype": "bf16", "phase": "decode", "batch": 1, "q_len": 1, "kv_len": 64, "heads": 4,
                  "kv_heads": 1, "head_dim": 64},
    "encoder_attention": {"dtype": "bf16", "batch": 1, "q_len": 64, "heads": 4, "head_dim": 64},
    "mla": {"dtype": "bf16", "phase": "decode", "batch": 1, "q_len": 1, "kv_len": 64, "heads": 4,
            "kv_lora_rank": 512, "rope_dim": 64, "head_dim": 128, "v_head_dim": 128},
    "mla_bmm": {"dtype": "bf16", "tokens": 64, "heads": 4, "kv_lora_rank": 512, "head_dim": 128},
    "all_reduce": {"dtype": "bf16", "message_bytes": 1 << 20, "group_size": 8},
    "all_gather": {"dtype": "bf16", "message_bytes": 1 << 20, "group_size": 8},
    "reduce_scatter": {"dtype": "bf16", "message_bytes": 1 << 20, "group_size": 8},
    "all_to_all": {"dtype": "bf16", "message_bytes": 1 << 20, "group_size": 8},
    "moe_combine": {"dtype": "bf16", "tokens": 128, "hidden": 7168, "topk": 8, "experts": 256, "ep": 8},
}
# fmt: on


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("formulas") / "template.duckdb"
    open_corpus(db).close()
    return db


@pytest.fixture
def db(template, tmp_path) -> Path:
    path = tmp_path / "store.duckdb"
    shutil.copy(template, path)
    return path


def _parquet(path: Path, rows: list[dict]) -> Path:
    names = sorted({k for r in rows for k in r} | {"op_kind", "gpu", "library", "latency_us"})
    schema = pa.schema([(n, COLUMNS.get(n, pa.int64())) for n in names])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _row(op_kind: str, fields: dict, latency_us: float) -> dict:
    return {"op_kind": op_kind, "gpu": H200, "library": "test", "latency_us": latency_us, **fields}


def test_every_op_kind_has_a_case():
    assert set(CASES) | set(EARLIER) == {k.name for k in OP_KINDS}
    assert not set(CASES) & set(EARLIER)


def test_hand_derived_work_of_every_new_formula(db, tmp_path):
    rows = [_row(kind, fields, KEPT_US) for kind, (fields, *_) in CASES.items()]
    rows += [_row(kind, fields, KEPT_US) for kind, fields in EARLIER.items()]
    report = import_files(db, [_parquet(tmp_path / "cases.parquet", rows)])
    assert report.total("rows_rejected") == 0, [r.render() for r in report.sample]
    got = {
        r["op_kind"]: r
        for r in api.query(
            "select op_kind, flops, hbm_bytes, link_bytes, mfu, mbu, link_util, peak_flops_per_s "
            "from int_kernel_corpus_work",
            db=db,
        ).to_pylist()
    }
    for kind, (_, flops, hbm, link) in CASES.items():
        for name, want in (("flops", flops), ("hbm_bytes", hbm), ("link_bytes", link)):
            if want is None:
                assert got[kind][name] is None, (kind, name)
            else:
                assert got[kind][name] == pytest.approx(want, rel=1e-12), (kind, name)
    # every kind of the registry has at least one work number to hold a time against
    for kind in {k.name for k in OP_KINDS}:
        assert any(got[kind][n] is not None for n in ("flops", "hbm_bytes", "link_bytes")), kind
    # the MLA block's projections run in its FP8 weights: the FP8 peak, not the BF16 one
    mla = got["mla_module"]
    assert mla["peak_flops_per_s"] == 1978e12
    assert mla["mfu"] == pytest.approx((9_126_805_504 + 2_675_965_952) / 10e-3 / 1978e12)
    assert got["moe_dispatch"]["link_util"] == pytest.approx(CASES["moe_dispatch"][3] / 10e-3 / 450e9)


def test_a_skewed_routing_or_a_second_node_gives_no_link_bound(db, tmp_path):
    base = CASES["moe_dispatch"][0]
    rows = [
        _row("moe_dispatch", {**base, "routing": "power_law_1.2"}, KEPT_US),  # may keep tokens local
        _row("moe_combine", {**base, "nodes": 2}, KEPT_US),  # the NIC, not NVLink, bounds it
    ]
    import_files(db, [_parquet(tmp_path / "a2a.parquet", rows)])
    got = api.query("select op_kind, link_bytes, hbm_bytes from kernel_measurements order by op_kind", db=db)
    assert got.to_pylist() == [
        {"op_kind": "moe_combine", "link_bytes": None, "hbm_bytes": 2 * 128 * 7168},
        {"op_kind": "moe_dispatch", "link_bytes": None, "hbm_bytes": 2 * 128 * 7168},
    ]


def test_a_weight_only_scheme_keeps_the_compute_dtype_peak(db, tmp_path):
    """int8_wo: BF16 math over INT8 weights (kernel_dtype_names names a separate weight
    dtype) -> the BF16 peak; an FP8 weight format on a BF16 module -> the FP8 peak."""
    rows = [_row("gemm", {"dtype": "int8_wo", "m": 64, "n": 64, "k": 64}, KEPT_US)]
    import_files(db, [_parquet(tmp_path / "wo.parquet", rows)])
    (row,) = api.query(
        "select c.weight_dtype, c.quant, w.peak_flops_per_s from kernel_corpus c "
        "join int_kernel_corpus_work w using (source_hash, source_row, op_kind)",
        db=db,
    ).to_pylist()
    assert row == {"weight_dtype": "int8", "quant": "int8_wo", "peak_flops_per_s": 989e12}


def test_a_time_faster_than_the_hardware_is_rejected_in_every_family(db, tmp_path):
    """Every signature above timed at 1 ps (a time in the wrong unit) implies more than the
    GPU's peak: each row is rejected, its reason names the bound it breaks with the number."""
    kinds = sorted(CASES)
    rows = [_row(kind, CASES[kind][0], 1e-6) for kind in kinds]
    report = import_files(db, [_parquet(tmp_path / "fast.parquet", rows)])
    assert (report.total("rows_read"), report.total("rows_kept")) == (len(kinds), 0)
    reasons = {
        r["source_row"]: r
        for r in api.query("select source_row, op_kind, field, reason from kernel_corpus_rejects", db=db).to_pylist()
    }
    assert len(reasons) == len(kinds)
    for i, kind in enumerate(kinds):
        _, flops, hbm, link = CASES[kind]
        rejection = reasons[i]
        assert (rejection["op_kind"], rejection["field"]) == (kind, "latency_us")
        reason = rejection["reason"]
        if hbm is not None:
            assert f"implied MBU {hbm / 1e-12 / 4.8e12:.3g} > 1" in reason, (kind, reason)
        if link is not None:
            assert f"implied link use {link / 1e-12 / 450e9:.3g} > 1" in reason, (kind, reason)
        if flops is not None:
            assert "implied MFU " in reason, (kind, reason)
        assert reason.endswith("is the time in the unit it claims (the file gives latency_us)?"), kind
    # the compute bound in numbers, for one kind per dtype
    gdn, dsa_attn = reasons[kinds.index("gdn")]["reason"], reasons[kinds.index("mqa_logits")]["reason"]
    assert f"implied MFU {CASES['gdn'][1] / 1e-12 / 989e12:.3g} > 1" in gdn  # BF16 peak
    assert f"implied MFU {CASES['mqa_logits'][1] / 1e-12 / 1978e12:.3g} > 1" in dsa_attn  # FP8 peak


def test_compressed_pairs_macro_against_the_plain_sum(template):
    """kernel_compressed_pairs(s, c, r, k) = sum over j = c - s + 1 .. c of min(k, j // r),
    summed here term by term (k None: no cap)."""
    con = duckdb.connect(str(template), read_only=True)
    try:
        for s, c, r, k in itertools.product((1, 2, 5, 8), (1, 7, 16, 33, 64), (1, 3, 4, 128), (None, 1, 6)):
            if s > c:
                continue
            want = sum(j // r if k is None else min(k, j // r) for j in range(c - s + 1, c + 1))
            got = con.execute("select kernel_compressed_pairs($s, $c, $r, $k)", {"s": s, "c": c, "r": r, "k": k})
            assert got.fetchone()[0] == want, (s, c, r, k)
    finally:
        con.close()


# -- aiconfigurator tables: conv kernels and model geometry --------------------------------


def _write(root: Path, rel: str, rows: list[dict]) -> None:
    path = root / "aiconfigurator_core" / "systems" / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


# fmt: off
GDN_ROW = {"device": "NVIDIA H200", "op_name": "gdn", "phase": "generation", "batch_size": 256, "seq_len": 1,
           "num_tokens": 256, "d_model": 4096, "d_conv": 4, "num_k_heads": 16, "head_k_dim": 128,
           "num_v_heads": 32, "head_v_dim": 128, "model_name": "Qwen/Qwen3.5-9B", "latency": 0.5}
MODULE_ROW = {"device": "NVIDIA H200", "framework": "VLLM", "version": "0.24.0", "kernel_source": "FLASHMLA",
              "model": "deepseek-ai/DeepSeek-V3", "architecture": "DeepseekV3ForCausalLM", "mla_dtype": "bfloat16",
              "kv_cache_dtype": "fp8", "gemm_type": "fp8_block", "num_heads": 16, "batch_size": 64, "isl": 1,
              "tp_size": 1, "step": 4095, "latency": 10.0}
# the keys model_configs files carry (values of DeepSeek-V3 / GLM-5's config.json)
CONFIGS = {
    "deepseek-ai--DeepSeek-V3_config.json": {"hidden_size": 7168, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                             "qk_nope_head_dim": 128, "v_head_dim": 128},
    "zai-org--GLM-5_config.json": {"text_config": {"index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048}},
}
# fmt: on


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    import json

    root = tmp_path_factory.mktemp("aic")
    (root / "aiconfigurator_core-0.12.0.dist-info").mkdir()
    configs = root / "aiconfigurator_core" / "model_configs"
    configs.mkdir(parents=True)
    for name, config in CONFIGS.items():
        (configs / name).write_text(json.dumps(config), encoding="utf-8")
    _write(
        root,
        "h200_sxm/linear_attention/sglang/0.5.14/gdn_perf.parquet",
        [
            {**GDN_ROW, "framework": "SGLang", "version": "0.5.14", "kernel_source": "causal_conv1d_update"},
            {
                **GDN_ROW,
                "framework": "SGLang",
                "version": "0.5.14",
                "kernel_source": "fused_recurrent_gated_delta_rule_packed_decode",
            },
        ],
    )
    _write(
        root,
        "h200_sxm/linear_attention/trtllm/1.3.0rc20/gdn_perf.parquet",
        [
            {**GDN_ROW, "framework": "TRTLLM", "version": "1.3.0rc20", "kernel_source": "causal_conv1d_update"},
        ],
    )
    _write(
        root,
        "h200_sxm/mla/vllm/0.24.0/mla_generation_module_perf.parquet",
        [
            {**MODULE_ROW, "op_name": "mla_generation_module"},
            {**MODULE_ROW, "op_name": "mla_generation_module", "model": "someone/Unknown-Model"},
        ],
    )
    _write(
        root,
        "h200_sxm/dsa/sglang/kernel-level/glm5_mqa_logits_module_perf.parquet",
        [
            {
                **MODULE_ROW,
                "framework": "SGLang",
                "version": "kernel-level",
                "op_name": "glm5_mqa_logits_module",
                "kernel_source": "deep_gemm.fp8_mqa_logits",
                "model": "zai-org/GLM-5",
                "mla_dtype": "fp8_e4m3",
                "kv_cache_dtype": "fp8_e4m3",
                "num_heads": 64,
                "batch_size": 1,
                "isl": 2048,
                "step": 0,
                "compress_ratio": 1,
                "latency": 1.0,
            },
        ],
    )
    return root


def test_aiconfigurator_conv_kernels_and_model_geometry(package, db):
    report = import_aiconfigurator(db, location=package)
    assert report.total("rows_rejected") == 0, [r.render() for r in report.sample]
    rows = api.query(
        "select library, op_kind, kernel, hidden, conv_kernel, heads, head_dim, kv_lora_rank, rope_dim, v_head_dim, "
        "index_topk, dtype, attrs, flops, hbm_bytes, model from kernel_measurements order by library, op_kind, model",
        db=db,
    ).to_pylist()
    by = {(r["library"], r["op_kind"], r["model"]): r for r in rows}
    # conv kernels are their own op kind; channels as each collector sizes its conv input
    sg = by[("sglang", "causal_conv1d", "Qwen/Qwen3.5-9B")]
    assert (sg["hidden"], sg["conv_kernel"], sg["dtype"]) == (2 * 16 * 128 + 32 * 128, 4, "bf16")
    assert '"d_model":4096' in sg["attrs"]
    assert by[("trtllm", "causal_conv1d", "Qwen/Qwen3.5-9B")]["hidden"] == 16 * 128  # key channels only
    rule = by[("sglang", "gdn", "Qwen/Qwen3.5-9B")]
    assert (rule["kernel"], rule["hidden"], rule["flops"]) == (
        "fused_recurrent_gated_delta_rule_packed_decode",
        4096,
        6 * 256 * 32 * 128 * 128,
    )
    # the module's geometry comes from the model's config in the package
    mla = by[("vllm", "mla_module", "deepseek-ai/DeepSeek-V3")]
    assert (mla["kv_lora_rank"], mla["rope_dim"], mla["head_dim"], mla["v_head_dim"]) == (512, 64, 128, 128)
    assert mla["flops"] == 2 * 64 * 16 * 4096 * 1088 + 2 * 64 * 20_905_984  # as the mla_module case above
    unknown = by[("vllm", "mla_module", "someone/Unknown-Model")]
    assert unknown["kv_lora_rank"] is None and unknown["flops"] is None  # no config: no formula, kept
    # the indexer runs its own heads: 32 index heads of 128 from the config; 64 attention heads in attrs
    mqa = by[("sglang", "mqa_logits", "zai-org/GLM-5")]
    assert (mqa["heads"], mqa["head_dim"], mqa["index_topk"]) == (32, 128, 2048)
    assert '"num_heads":64' in mqa["attrs"]
    assert mqa["flops"] == 2 * 32 * 128 * (2048 * 2049 // 2)
