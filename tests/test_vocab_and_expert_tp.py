"""Tensor parallelism of the vocabulary (embedding, lm_head) and of stacked routed experts,
against hand derivations from the configs (issue 12, items 2 and 5).

Rules (docs/pricing.md, "Vocabulary and stacked experts under tensor parallelism"):
- the embedding table and lm_head [vocab, d_model] are split by vocabulary rows over the
  attention TP group (vLLM VocabParallelEmbedding / ParallelLMHead); the lookup's output is a
  pending sum reduced by one all-reduce (masked lookup + all-reduce), the logits are
  all-gathered where they leave the graph (vLLM LogitsProcessor._gather_logits);
- a stacked expert tensor [E, 2f, d] / [E, d, f] is split on its f axis by moe_tp (vLLM
  FusedMoE._load_w13 / _load_w2), its MXFP4 block scales with it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.store import connect, insert_deployments

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
TP = 8  # 8xH200-tp8: tp 8, moe_tp 8, ep 1
BF16 = 2


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(scope="module")
def con(models_db):
    c = connect(models_db)
    yield c
    c.close()


def _weight_bytes(con, model: str, deployment: str, uid_like: str) -> float:
    return con.execute(
        "select sum(bytes) from int_device_weights where model = ? and deployment = ? and uid like ?",
        [model, deployment, uid_like],
    ).fetchone()[0]


# -- item 5: vocabulary-parallel embedding and lm_head -------------------------------------


def test_llama_embedding_and_lm_head_are_split_by_vocab_on_tp8(con):
    """Llama-3.1-8B (untied): each table is vocab·d_model BF16 values; TP8 keeps 1/8 of the
    rows on every GPU (128256 / 8 = 16032 rows, exact); one GPU keeps all of them."""
    cfg = _cfg("meta-llama__Meta-Llama-3.1-8B.json")
    vocab, d = cfg["vocab_size"], cfg["hidden_size"]
    assert not cfg["tie_word_embeddings"]
    whole = vocab * d * BF16  # 1.05 GB
    for uid in ("embed_tokens", "lm_head"):
        assert _weight_bytes(con, "Meta-Llama-3.1-8B", "1xH200-single", uid) == whole
        assert _weight_bytes(con, "Meta-Llama-3.1-8B", "8xH200-tp8", uid) == whole / TP


def test_llama_tp8_decode_reads_a_vocab_slice_and_gathers_the_logits(con):
    """Decode at batch 1 (decode_b1_c2k) on 8xH200-tp8.

    lm_head on one GPU: FLOPs 2·B·d·vocab / 8, weight bytes read vocab·d·2 / 8 (was the whole
    1.05 GB on each of 8 ranks).  Logits all-gather over the 8 ranks: each receives the 7
    other slices of B·vocab/8 BF16 logits = 7·B·vocab/8·2 bytes.  Embedding all-reduce of its
    pending sum B·d BF16 values, ring: 2·(n−1)/n·B·d·2 bytes.  Both are inferred by the
    layouts pass (consumer = the producing node, port -1), nobody writes them."""
    cfg = _cfg("meta-llama__Meta-Llama-3.1-8B.json")
    vocab, d, batch, n = cfg["vocab_size"], cfg["hidden_size"], 1, TP
    rows = dict(
        (uid, (op, flops, byts, comm))
        for uid, op, flops, byts, comm in con.execute(
            "select uid, op, flops, bytes, comm_bytes from op_sol where model = 'Meta-Llama-3.1-8B' "
            "and deployment = '8xH200-tp8' and workload = 'decode_b1_c2k' "
            "and (uid like 'lm_head%' or uid like 'embed_tokens%')"
        ).fetchall()
    )
    _, flops, byts, _ = rows["lm_head"]
    assert flops == 2 * batch * d * vocab / n
    weight = vocab * d * BF16 / n
    activations = (batch * d + batch * vocab / n) * BF16  # hidden in (whole), logits slice out
    assert byts == pytest.approx(weight + activations)
    assert rows["lm_head#all_gather[-1]"][0] == "all_gather"
    assert rows["lm_head#all_gather[-1]"][3] == pytest.approx((n - 1) * batch * vocab / n * BF16)
    assert rows["embed_tokens#all_reduce[-1]"][0] == "all_reduce"
    assert rows["embed_tokens#all_reduce[-1]"][3] == pytest.approx(2 * (n - 1) / n * batch * d * BF16)
    # one reduction of the embedding, not one per layer: the residual stream enters whole
    per_layer = con.execute(
        "select count(*) from base_collectives where model = 'Meta-Llama-3.1-8B' and phase = 'decode' "
        "and uid like 'decoder/%' and kind = 'all_reduce' and \"group\" in ('attention', 'ffn')"
    ).fetchone()[0]
    assert per_layer == 2  # after o_proj and down_proj (the residual adds), as before


def test_single_gpu_has_no_vocab_collectives(con):
    """Degree 1 makes every collective free: no comm bytes on 1xH200-single (a group of
    degree 1 has no rows in op_sol, or rows of 0 bytes)."""
    comm = con.execute(
        "select sum(comm_bytes) from op_sol where model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single' "
        "and workload = 'decode_b1_c2k' and (uid like 'lm_head#%' or uid like 'embed_tokens#%')"
    ).fetchone()[0]
    assert not comm


def test_deepseek_v3_tp8_saves_seven_eighths_of_both_vocab_tables(con):
    """DeepSeek-V3 in BF16 on 8xH200-tp8: embed + lm_head = 2·vocab·d·2 B whole; a GPU now
    holds 1/8 (129280 / 8 = 16160 rows): 3.24 GB less per GPU."""
    cfg = _cfg("deepseek-ai__DeepSeek-V3.json")
    whole = 2 * cfg["vocab_size"] * cfg["hidden_size"] * BF16
    got = sum(_weight_bytes(con, "DeepSeek-V3", "8xH200-tp8", uid) for uid in ("embed_tokens", "lm_head"))
    assert got == whole / TP
    assert whole - got == pytest.approx(3.24e9, rel=0.01)


# -- item 2: stacked experts split by MoE tensor parallelism --------------------------------


def test_gpt_oss_stacked_experts_split_by_moe_tp_in_bf16(con):
    """gpt-oss-20b on 8xH200-tp8 (moe_tp 8, ep 1): every device holds all E experts, each cut
    on its f axis: gate_up_proj [E, 2f, d] keeps 2f/8 rows of interleaved (gate, up) pairs,
    down_proj [E, d, f] keeps f/8 columns — all expert weights / 8."""
    cfg = _cfg("openai__gpt-oss-20b.json")
    e, d, f, layers = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    total = layers * e * (2 * f * d + d * f) * BF16
    got = con.execute(
        "select sum(bytes) from int_device_weights where model = 'gpt-oss-20b' and deployment = ? "
        "and (uid like 'decoder/%/mlp.gate_up_proj' or uid like 'decoder/%/mlp.down_proj') and tensor = 'weight'",
        ["8xH200-tp8"],
    ).fetchone()[0]
    assert got == total / TP
    one = con.execute(
        "select sum(bytes) from int_device_weights where model = 'gpt-oss-20b' and deployment = '1xH200-single' "
        "and (uid like 'decoder/%/mlp.gate_up_proj' or uid like 'decoder/%/mlp.down_proj') and tensor = 'weight'"
    ).fetchone()[0]
    assert one == total


def test_gpt_oss_tp8_decode_expert_flops_are_split(con):
    """gate_up_proj FLOPs per GPU at decode batch 1: 2·B·k·d·2f per layer / 8 (the rows each
    GPU holds), over all layers; the clamped SwiGLU keeps the split (whole pairs)."""
    cfg = _cfg("openai__gpt-oss-20b.json")
    k, d, f, layers = cfg["num_experts_per_tok"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    flops = con.execute(
        "select sum(flops) from op_sol where model = 'gpt-oss-20b' and deployment = '8xH200-tp8' "
        "and workload = 'decode_b1_c2k' and uid like 'decoder/%/mlp.gate_up_proj'"
    ).fetchone()[0]
    bias = k * 2 * f  # one add per output element
    assert flops == pytest.approx(layers * (2 * k * d * 2 * f + bias) / TP)
    act = con.execute(
        "select sum(flops) from op_sol where model = 'gpt-oss-20b' and deployment = '8xH200-tp8' "
        "and workload = 'decode_b1_c2k' and uid like 'decoder/%/mlp.act'"
    ).fetchone()[0]
    assert act == pytest.approx(layers * 11 * k * f / TP)


def test_gpt_oss_mxfp4_experts_split_by_moe_tp_with_their_scales(models_db, tmp_path):
    """gpt-oss-20b as shipped (weight_profile native: MXFP4 blocks of 32 along the input
    axis, one E8M0 scale byte per block) on TP8 (moe_tp 8, ep 1).

    gate_up_proj blocks [E, 2f, d/32, 16] + scales [E, 2f, d/32]: split on the 2f rows, so
    exactly 1/8 of both.  down_proj blocks [E, d, f/32, 16] + scales [E, d, f/32]: split on
    the f columns, a GPU's f/8 = 360 columns are 11.25 blocks; whole blocks are stored:
    ceil(f/8/32) = 12 of them (and 12 scales)."""
    cfg = _cfg("openai__gpt-oss-20b.json")
    e, d, f, layers = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    gate_up = {"data": e * 2 * f * (d // 32) * 16, "scales": e * 2 * f * (d // 32)}
    local_blocks = -(-(f // TP) // 32)  # ceil
    down = {"data": e * d * local_blocks * 16, "scales": e * d * local_blocks}
    db = tmp_path / "store.duckdb"
    shutil.copy(models_db, db)
    c = duckdb.connect(str(db))
    insert_deployments(c, [{"deployment": "8xH200-tp8-native", "weight_profile": "native"}], like="8xH200-tp8")

    def stored(deployment: str, node: str) -> dict:
        return dict(
            c.execute(
                "select part, sum(total_bytes) from int_device_storage where model = 'gpt-oss-20b' "
                "and deployment = ? and uid like ? and tensor = 'weight' group by part",
                [deployment, f"decoder/%/mlp.{node}"],
            ).fetchall()
        )

    assert stored("8xH200-tp8-native", "gate_up_proj") == {p: layers * b / TP for p, b in gate_up.items()}
    assert stored("8xH200-tp8-native", "down_proj") == {p: layers * b for p, b in down.items()}
    c.close()
