"""Multi-token prediction is a deployment choice (deployments.speculative_tokens): a
deployment that does not draft neither holds nor runs DeepSeek-V3's MTP layer; one that
drafts k tokens per step holds it — its embedding and head being the target model's tables,
held once — keeps its KV cache, and runs it k times per decode step.  Expected values are
derived from DeepSeek-V3's config.json and the checkpoint's storage rules (below)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.store import connect, insert_deployments, keep_deployments, refresh

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
MODELS = ("DeepSeek-V3", "gpt-oss-120b", "Meta-Llama-3.1-8B")  # one store with tests/test_native_weights.py


DRAFTED = ("1xH200-wnative", "1xH200-single", "8xH200-tp8-ep8-wnative")  # the deployments asked about


def _cfg() -> dict:
    return json.loads((CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())


@pytest.fixture(scope="module")
def con(store_of, tmp_path_factory):
    """The default deployments plus drafting copies of two of them (k = 1, 2)."""
    db = tmp_path_factory.mktemp("mtp") / "store.duckdb"
    shutil.copy(store_of(*MODELS), db)
    c = duckdb.connect(str(db))
    for like in DRAFTED:
        insert_deployments(
            c,
            [{"deployment": f"{like}-mtp{k}", "speculative_tokens": k} for k in (1, 2)],
            like=like,
        )
    keep_deployments(c, [d for like in DRAFTED for d in (like, f"{like}-mtp1", f"{like}-mtp2")])
    refresh(c)  # the derived tables of the store as the tests ask about it
    c.close()
    c = connect(db)
    yield c
    c.close()


def _memory(con, deployment, workload="decode_b64_c8k", model="DeepSeek-V3"):
    return con.execute(
        "select weight_bytes, kv_bytes from device_memory where model = ? and deployment = ? and workload = ?",
        [model, deployment, workload],
    ).fetchone()


def _mtp_layer_bytes(cfg: dict, *, fp8: bool) -> dict[str, int]:
    """Bytes of DeepSeek-V3's MTP layer (model.layers.61) as a deployment holds them, by part.

    Checkpoint storage (config quantization_config: fp8, weight_block_size [128, 128]; the
    spec's quant_context): the decoder layer's linears — MLA projections, every routed and
    the shared expert's gate/up/down — are FP8 (1 byte per element) with one F32 inverse
    scale per 128×128 block; norms, the router weight and the MTP glue (enorm, hnorm,
    eh_proj, shared_head.norm: vLLM builds eh_proj as a plain nn.Linear) are BF16; the
    router's e_score_correction_bias is F32.  With ``fp8`` false (the bf16 profile) every
    linear is BF16 too.  Not counted: the layer's embed_tokens and shared_head.head
    [vocab, hidden], which the checkpoint stores again but serving shares with the target."""
    d, br, bc = cfg["hidden_size"], *cfg["quantization_config"]["weight_block_size"]
    heads, nope, rope, v = (
        cfg["num_attention_heads"],
        cfg["qk_nope_head_dim"],
        cfg["qk_rope_head_dim"],
        cfg["v_head_dim"],
    )
    q_lora, kv_lora = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    inter, experts = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    shared_inter = inter * cfg["n_shared_experts"]

    def linear(out: int, inp: int) -> int:
        if fp8:
            return out * inp + 4 * math.ceil(out / br) * math.ceil(inp / bc)
        return 2 * out * inp

    attention = (
        linear(q_lora, d)  # q_a_proj
        + linear(heads * (nope + rope), q_lora)  # q_b_proj
        + linear(kv_lora + rope, d)  # kv_a_proj_with_mqa
        + linear(heads * (nope + v), kv_lora)  # kv_b_proj
        + linear(d, heads * v)  # o_proj
    )
    routed = experts * (2 * linear(inter, d) + linear(d, inter))  # gate_proj, up_proj, down_proj
    shared = 2 * linear(shared_inter, d) + linear(d, shared_inter)
    router = 2 * experts * d + 4 * experts  # gate.weight BF16, e_score_correction_bias F32
    norms = 2 * (d + d + q_lora + kv_lora)  # input / post_attention, q_a / kv_a layernorms
    glue = 2 * (d + d + d) + 2 * d * (2 * d)  # enorm, hnorm, shared_head.norm; eh_proj [d, 2d]
    return {
        "attention": attention,
        "experts": routed + shared,
        "router": router,
        "norms": norms,
        "glue": glue,
    }


def test_mtp_weights_counted_only_when_drafting_and_the_shared_tables_once(con):
    cfg = _cfg()
    vocab_tables = 2 * (cfg["vocab_size"] * cfg["hidden_size"] * 2)  # embed_tokens + shared_head.head, BF16
    for deployment, fp8 in (("1xH200-wnative", True), ("1xH200-single", False)):
        expected = sum(_mtp_layer_bytes(cfg, fp8=fp8).values())
        off, _ = _memory(con, deployment)
        on1, _ = _memory(con, f"{deployment}-mtp1")
        on2, _ = _memory(con, f"{deployment}-mtp2")
        assert on1 - off == expected, deployment
        assert on2 == on1  # more draft tokens reuse the same layer: no more weights
        # the checkpoint's own copies of the two vocabulary tables are in storage, and left out
        (stored,) = con.execute(
            "select sum(total_bytes) from int_device_storage where model = 'DeepSeek-V3' and deployment = ? and uid like 'mtp/%'",
            [f"{deployment}-mtp1"],
        ).fetchone()
        assert stored == expected + vocab_tables
    # native: 11.72 GB for the MTP layer (FP8 experts), not 11.72 + 3.71 GB
    assert sum(_mtp_layer_bytes(cfg, fp8=True).values()) == 11_717_511_392


def test_mtp_layer_keeps_its_own_latent_cache_when_drafting(con):
    """The MTP layer's MLA attention caches its own latent (kv_lora_rank) and rope key
    (qk_rope_head_dim) per token, like one more decoder layer: at batch 64 × context 8192 in
    a BF16 cache that is 64 · 8192 · (512 + 64) · 2 bytes more on one GPU."""
    cfg = _cfg()
    _, off = _memory(con, "1xH200-wnative")
    _, on = _memory(con, "1xH200-wnative-mtp1")
    assert on - off == 64 * 8192 * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2


def _op(con, deployment, workload, uid):
    return con.execute(
        "select runs, flops from op_sol where model = 'DeepSeek-V3' and deployment = ? and workload = ? and uid = ?",
        [deployment, workload, uid],
    ).fetchone()


def test_draft_forwards_per_step(con):
    """The rule: k MTP forwards per decode step (one per draft token), one per prefill step.
    eh_proj [hidden, 2·hidden] does 2 · tokens · 2·hidden · hidden FLOPs per forward; the
    shared head 2 · sampled positions · hidden · vocab (decode: every request's new token)."""
    cfg = _cfg()
    d, vocab = cfg["hidden_size"], cfg["vocab_size"]
    eh, head = "mtp/mtp/eh_proj", "mtp/mtp/shared_head"
    assert _op(con, "1xH200-wnative", "decode_b64_c8k", eh) is None  # not drafting: not run
    for k in (1, 2):
        dep = f"1xH200-wnative-mtp{k}"
        assert _op(con, dep, "decode_b64_c8k", eh) == (k, k * 2 * 64 * (2 * d) * d)
        assert _op(con, dep, "decode_b64_c8k", head) == (k, k * 2 * 64 * d * vocab)
        assert _op(con, dep, "prefill_2k", eh) == (1, 2 * 2048 * (2 * d) * d)
    (n,) = con.execute(
        "select count(*) from op_sol where model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8-wnative' and uid like 'mtp/%'"
    ).fetchone()
    assert n == 0


def test_step_time_grows_by_one_draft_forward_per_token(con):
    """step(k) = step(0) + k · (one draft forward): the increments are equal, and positive."""
    for base in ("1xH200-wnative", "8xH200-tp8-ep8-wnative"):
        t = dict(
            con.execute(
                "select deployment, time_s from step_sol where model = 'DeepSeek-V3' and workload = 'decode_b64_c8k' "
                "and deployment in (?, ?, ?)",
                [base, f"{base}-mtp1", f"{base}-mtp2"],
            ).fetchall()
        )
        one = t[f"{base}-mtp1"] - t[base]
        assert one > 0
        assert t[f"{base}-mtp2"] - t[base] == pytest.approx(2 * one, rel=1e-9)


def test_a_model_without_mtp_is_unchanged_by_drafting(con):
    for deployment in ("1xH200-wnative", "8xH200-tp8-ep8-wnative"):
        assert _memory(con, deployment, model="Meta-Llama-3.1-8B") == _memory(
            con, f"{deployment}-mtp2", model="Meta-Llama-3.1-8B"
        )
