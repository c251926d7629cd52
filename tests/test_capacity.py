"""Issue 12 items 9 and 10: the memory a device exposes, the usable fraction per framework,
whether a step fits and by how much it does not, and max batch per data-parallel rank.

Every expected value is derived here from config figures and stated formulas.
"""

from __future__ import annotations

import shutil

import duckdb
import pytest

from archsql.store import connect

MIB = 2**20


def _one(con, sql, *params):
    return con.execute(sql, list(params)).fetchone()


def test_h200_usable_is_the_exposed_mib_times_vllm_default(models_db):
    # nvidia-smi reports 143771 MiB on an H200 (gpus.csv S28); vLLM gpu_memory_utilization
    # defaults to 0.9 of that total.  The marketed 141 GB (141e9 B) is kept and flagged:
    # 143771 × 2^20 = 150,755,931,136 B is 6.9 % above it.
    expected = 143771 * MIB * 0.9  # = 135,679,338,086.4 B
    con = connect(models_db)
    framework, fraction, source, memory, marketed, basis, usable = _one(
        con,
        "select framework, memory_fraction, fraction_from, memory_bytes, marketed_memory_bytes, memory_basis,"
        " usable_bytes from int_deployment_memory where deployment = '1xH200-single'",
    )
    assert (framework, fraction, source, basis) == ("vllm", 0.9, "framework default", "device")
    assert memory == 143771 * MIB and marketed == 141e9
    assert usable == pytest.approx(expected, rel=1e-15)
    assert _one(con, "select memory_disagrees from int_gpu_specs where gpu = 'H200 SXM' and dtype = 'bf16'") == (True,)
    # B200: 183359 MiB reported (S29) vs 180 GB marketed
    b200 = _one(
        con, "select memory_bytes, marketed_memory_bytes from int_gpu_specs where gpu like 'B200%' and dtype = 'bf16'"
    )
    assert b200 == (183359 * MIB, 180e9)
    usable_dm = _one(
        con,
        "select distinct usable_bytes from device_memory where deployment = '1xH200-single' and model = 'Meta-Llama-3.1-8B'",
    )
    assert usable_dm[0] == pytest.approx(expected, rel=1e-15)


def test_sglang_mem_fraction_static_follows_its_rule(models_db, tmp_path):
    # SGLang server_args.py _handle_gpu_memory_settings, gpu_mem = 143771 MiB (H200, < 160 GiB):
    # chunked_prefill_size 8192, cuda_graph_max_bs 512 (tp >= 4).  TP8 without DP attention:
    # reserved = 512 + 8192 × 1.5 + 512 × 2 + 8 × 1 / 8 × 1024 = 14848 MiB (> the 10240 floor);
    # fraction = round((143771 − 14848) / 143771, 3) = round(0.89672, 3) = 0.897.
    # DP8 attention (tp_size 8 = dp_size 8) adds 512 × 8 × 3 + 512 × 8 × 1.5 (graph bs > 300):
    # reserved = 14848 + 12288 + 6144 = 33280 MiB; round((143771 − 33280) / 143771, 3) = 0.769.
    # 1 GPU: graph bs 256 (tp < 4): 512 + 12288 + 512 + 128 = 13440; round(130331 / 143771, 3) = 0.907.
    db = tmp_path / "store.duckdb"
    shutil.copy(models_db, db)
    con = duckdb.connect(str(db))
    con.execute(
        "update deployment_frameworks set framework = 'sglang'"
        " where deployment in ('8xH200-tp8', '8xH200-dp8-ep8', '1xH200-single')"
    )
    got = dict(
        con.execute(
            "select deployment, memory_fraction from int_deployment_memory"
            " where deployment in ('8xH200-tp8', '8xH200-dp8-ep8', '1xH200-single')"
        ).fetchall()
    )
    assert got == {
        "8xH200-tp8": round((143771 - 14848) / 143771, 3),
        "8xH200-dp8-ep8": round((143771 - 33280) / 143771, 3),
        "1xH200-single": round((143771 - 13440) / 143771, 3),
    }
    assert got["8xH200-tp8"] == 0.897
    # a deployment's own fraction wins over its framework's default
    con.execute("update deployments set usable_memory_fraction = 0.8 where deployment = '8xH200-tp8'")
    assert _one(
        con, "select memory_fraction, fraction_from from int_deployment_memory where deployment = '8xH200-tp8'"
    ) == (
        0.8,
        "deployment",
    )


def test_llama_8b_b64_at_128k_on_one_h200_does_not_fit(models_db):
    # Llama-3.1-8B config: vocab 128256, d 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128,
    # ffn 14336, untied lm_head.  Params = 2 × 128256 × 4096 + 32 × (4096² (q) + 2 × 4096 × 1024 (k, v)
    # + 4096² (o) + 3 × 4096 × 14336 + 2 × 4096 (norms)) + 4096 = 8,030,261,248; BF16 → × 2 B.
    params = 2 * 128256 * 4096 + 32 * (4096**2 + 2 * 4096 * 1024 + 4096**2 + 3 * 4096 * 14336 + 2 * 4096) + 4096
    weights = params * 2  # 16,060,522,496 B
    # KV per token = 32 layers × 2 (K, V) × 8 heads × 128 × 2 B = 131072 B; × 131072 tokens × 64 requests
    kv = 32 * 2 * 8 * 128 * 2 * 131072 * 64  # 1,099,511,627,776 B (~1.1 TB)
    usable = 143771 * MIB * 0.9
    con = connect(models_db)
    w, k, act, fits_dm = _one(
        con,
        "select weight_bytes, kv_bytes, activation_bytes, fits from device_memory where model = 'Meta-Llama-3.1-8B'"
        " and deployment = '1xH200-single' and workload = 'decode_b64_c128k'",
    )
    assert (w, k) == (weights, kv)
    assert act < 1e-3 * kv  # the decode activations (liveness peak, ~17 MB) are negligible here
    fits, shortfall, time_s = _one(
        con,
        "select fits, shortfall_bytes, time_s from step_sol where model = 'Meta-Llama-3.1-8B'"
        " and deployment = '1xH200-single' and workload = 'decode_b64_c128k'",
    )
    assert fits is False and fits_dm is False and time_s > 0  # the time is still reported, flagged
    assert shortfall == pytest.approx(weights + kv + act - usable, rel=1e-12)  # ≈ 979.9e9 B
    assert shortfall == pytest.approx(weights + kv - usable, rel=1e-4)


def test_qwen3_30b_a3b_max_batch_per_dp_rank_on_dp8_ep8(models_db):
    # 8xH200-dp8-ep8: attention data parallel over 8 ranks (one GPU each), experts split by EP.
    # Qwen3-30B-A3B config: 48 layers, 4 KV heads, head_dim 128 → KV per token
    # 48 × 2 × 4 × 128 × 2 B = 98304 B; at context 32768 a request holds 3,221,225,472 B, all on
    # its own rank.  The rank's weights (attention replicated, 16 of 128 experts) come from
    # device_memory (checked by tests/test_device_memory.py); the activation peak per request
    # is the step's (activation_bytes) over the 8 requests a rank holds at batch 64.
    kv_per_request = 48 * 2 * 4 * 128 * 2 * 32768
    usable = 143771 * MIB * 0.9
    con = connect(models_db)
    w, k, act, batch, max_batch, per_rank, per_gpu = _one(
        con,
        "select weight_bytes, kv_bytes, activation_bytes, batch, max_batch, max_batch_per_dp_rank, max_batch_per_gpu"
        " from device_memory where model = 'Qwen3-30B-A3B' and deployment = '8xH200-dp8-ep8'"
        " and workload = 'decode_b64_c32k'",
    )
    rank_requests = batch // 8
    assert k == kv_per_request * rank_requests
    expected = (usable - w) // (kv_per_request + act / rank_requests)
    assert per_rank == expected == 38  # (135.68e9 − 10.33e9) / 3.2215e9 = 38.9
    assert per_gpu == max_batch / 8
    assert 8 * per_rank <= max_batch < 8 * (per_rank + 1)
