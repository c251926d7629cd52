"""Expert-parallel communication and dispatch buffers, derived by hand from the configs
(issue 12, items 3 and 4).

Rules (docs/pricing.md, "Routed experts under expert parallelism"):
- A token's (token, expert) pairs are spread over EP: a device holds its experts' share —
  the dispatch buffer and every expert intermediate per device are pairs / ep.
- A routed output is a pending sum over the tensor-parallel devices holding the token; with
  attention TP and experts EP on the same GPUs (TP8+EP8) nothing travels and the MoE output
  is reduced by the one all-reduce that also reduces the shared expert (per layer: one for
  attention, one for the MoE block).
- Attention-DP + EP: the dispatch all-to-all sends a token once per distinct destination
  rank other than its own: D = R·(1 − C(E − E/R, k)/C(E, k)) ranks, (R − 1)/R of them remote;
  the combine returns one reduced vector per (token, rank).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from archsql.store import connect

CONFIGS = Path(__file__).resolve().parents[1] / "archsql" / "specs" / "configs"
BF16 = 2  # bytes


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


V3 = _cfg("deepseek-ai__DeepSeek-V3.json")
D_MODEL = V3["hidden_size"]  # 7168
E, K = V3["n_routed_experts"], V3["num_experts_per_tok"]  # 256, 8
LAYERS = V3["num_hidden_layers"]  # 61
MOE_LAYERS = LAYERS - V3["first_k_dense_replace"]  # 58


def _ranks_reached(experts: int, k: int, ranks: int) -> float:
    """Distinct ranks a token's k distinct uniform experts land on (experts/ranks per rank)."""
    return ranks * (1 - math.comb(experts - experts // ranks, k) / math.comb(experts, k))


def _comm(con, deployment: str, workload: str) -> dict[tuple[str, str], float]:
    rows = con.execute(
        "select op, role, sum(comm_bytes) from op_sol where model = 'DeepSeek-V3' and deployment = ?"
        " and workload = ? and uid like 'decoder/%' and comm_bytes > 0 group by op, role",
        [deployment, workload],
    ).fetchall()
    return {(op, role): b for op, role, b in rows}


def test_tp8_ep8_has_no_all_to_all_and_one_all_reduce_per_block(models_db):
    """DeepSeek-V3, 8xH200 TP8+EP8, prefill of 2048 tokens.  Tokens are on every GPU after the
    attention all-reduce; each GPU runs its 32 experts on all of them and the MoE output (with
    the shared expert's TP partial) is reduced once.  Per layer 2 ring all-reduces of
    2048 · 7168 bf16 values, each sending 2 · 7/8 of it per GPU:
    61 · 2 · 2 · 7/8 · 2048 · 7168 · 2 B = 6.268 GB per GPU (13.9 ms at 450 GB/s; the old
    all-to-all of every token × top-8 alone was 23.8 GB)."""
    with connect(models_db) as con:
        comm = _comm(con, "8xH200-tp8-ep8", "prefill_2k")
    per_reduce = 2 * 7 / 8 * 2048 * D_MODEL * BF16
    assert not [key for key in comm if key[0] == "all_to_all"]
    assert comm == {("all_reduce", "residual"): pytest.approx(LAYERS * 2 * per_reduce, rel=1e-12)}


def test_dp8_ep8_dispatch_sends_each_token_once_per_remote_rank(models_db):
    """DeepSeek-V3, 8xH200 attention-DP8 + EP8, decode at batch 64: each rank holds 64/8 = 8
    tokens.  A token's 8 experts (of 256, 32 per rank) reach D = 8·(1 − C(224, 8)/C(256, 8))
    = 5.295 ranks; 7/8 of them are not its own.  Dispatch per GPU and MoE layer:
    8 · 5.295 · 7/8 · 7168 · 2 B = 607,492 B (the old per-expert count: 8 · 8 · 7/8 · 7168 · 2
    = 802,816 B); the combine returns as much; no all-reduce (TP 1)."""
    reached = _ranks_reached(E, K, 8)
    assert reached == pytest.approx(5.2947, abs=1e-4)
    per_layer = (64 // 8) * reached * 7 / 8 * D_MODEL * BF16
    with connect(models_db) as con:
        comm = _comm(con, "8xH200-dp8-ep8", "decode_b64_c2k")
    assert comm == {("all_to_all", "ffn_moe"): pytest.approx(2 * MOE_LAYERS * per_layer, rel=1e-9)}


def test_ranks_touched_macro_matches_the_binomial(models_db):
    with connect(models_db) as con:
        got = con.execute(
            "select ranks_touched(256, 8, 8), ranks_touched(128, 8, 8), ranks_touched(256, 8, 1),"
            " ranks_touched(8, 2, 8)"
        ).fetchone()
    # one rank: always 1; 8 experts on 8 ranks, top 2: exactly 2 ranks
    assert got == pytest.approx((_ranks_reached(256, 8, 8), _ranks_reached(128, 8, 8), 1.0, 2.0), rel=1e-12)


@pytest.mark.parametrize(
    "deployment, pairs_per_gpu",
    [
        # 1 GPU: all 64 tokens × top-8 pairs
        ("1xH200-single", 64 * K),
        # TP8+EP8: every GPU has the 64 tokens; its experts get 1/8 of the pairs
        ("8xH200-tp8-ep8", 64 * K / 8),
        # DP8+EP8: 64 tokens over 8 ranks, each GPU receives the pairs of its experts from all
        ("8xH200-dp8-ep8", 64 * K / 8),
    ],
)
def test_dispatch_buffer_holds_the_devices_pairs(models_db, deployment, pairs_per_gpu):
    """The dispatch output per GPU and MoE layer at decode batch 64 is the (token, expert)
    pairs its experts process × 7168 bf16 values — not the deployment's tokens × top-8 on
    every GPU (item 4).  The expert intermediates follow: the SiLU of gate_proj holds
    pairs × 2048 / moe_tp values."""
    with connect(models_db) as con:
        rows = dict(
            con.execute(
                "select uid, output_bytes from int_device_op_values where model = 'DeepSeek-V3'"
                " and deployment = ? and workload = 'decode_b64_c2k'"
                " and uid in ('decoder/moe/mlp.dispatch', 'decoder/moe/mlp.act')",
                [deployment],
            ).fetchall()
        )
    moe_tp = 1  # these deployments keep each expert whole
    assert rows["decoder/moe/mlp.dispatch"] == pytest.approx(MOE_LAYERS * pairs_per_gpu * D_MODEL * BF16)
    f = V3["moe_intermediate_size"]
    assert rows["decoder/moe/mlp.act"] == pytest.approx(MOE_LAYERS * pairs_per_gpu * f / moe_tp * BF16)
