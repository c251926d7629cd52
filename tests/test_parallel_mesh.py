"""Context parallelism, pipeline parallelism and multi-node link pricing, against hand
derivations from the configs and the GPU table.

GPU figures (archsql/gpus/gpus.csv, row H200 SXM): scaleup_bw_GBps 900 "bidirectional (450 per
direction)" → 450e9 bytes/s per direction; scaleup_domain_gpus 8; scaleout_nic_per_gpu_Gbps 400
→ 400e9 / 8 = 50e9 bytes/s per GPU and direction.  Activations and caches in bf16 (2 bytes).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest

from archsql.store import connect, freshness, insert_deployments, refresh

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"
NVLINK = 900e9 / 2  # H200 scale-up, per direction
NIC = 400e9 / 8  # H200 scale-out, per GPU and direction
BF16 = 2
LLAMA = "Meta-Llama-3.1-8B"
COLLECTIVES = ("all_reduce", "all_gather", "all_to_all", "ring_pass", "p2p")

# deployments added for these tests: name, gpus, tp, dp, ep, moe_tp, pp, cp, cp_kind, nodes
# the fields every extra deployment shares
BF16_H200 = {
    "gpu": "H200 SXM",
    "weight_dtype": "bf16",
    "act_dtype": "bf16",
    "kv_dtype": "bf16",
    "usable_memory_fraction": 0.9,
    "weight_profile": "bf16",
}
EXTRA = [
    ("2xH200-cp2-ring", 2, 1, 1, 1, 2, 1, 2, "ring", None),
    ("2xH200-cp2-ulysses", 2, 1, 1, 1, 2, 1, 2, "ulysses", None),
    ("8xH200-tp8-2nodes", 8, 8, 1, 1, 8, 1, 1, "none", 2),  # one TP8 group over 2 nodes of 4
    ("8xH200-dp8-ep8-2nodes", 8, 1, 8, 8, 1, 1, 1, "none", 2),
    ("16xH200-tp4-pp4", 16, 4, 1, 1, 4, 4, 1, "none", None),  # 4 stages of 4 GPUs on 2 nodes of 8
    ("64xH200-pp64", 64, 1, 1, 1, 1, 64, 1, "none", None),  # more stages than most models have layers
]


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture(scope="module")
def mesh_db(models_db, tmp_path_factory):
    db = tmp_path_factory.mktemp("mesh") / "store.duckdb"
    shutil.copy(models_db, db)
    con = duckdb.connect(str(db))
    insert_deployments(
        con,
        [
            {**BF16_H200, "deployment": name, "gpus": gpus, "tp": tp, "dp": dp, "ep": ep, "moe_tp": moe_tp}
            | {"pp": pp, "cp": cp, "cp_kind": kind, "nodes": nodes}
            for name, gpus, tp, dp, ep, moe_tp, pp, cp, kind, nodes in EXTRA
        ],
    )
    assert con.execute("select * from deployment_checks").fetchall() == []
    # the derived tables computed once for the extra deployments (the views' own SQL, as a build
    # does): every op_sol / device_memory read below is then a table scan, not the view chain
    # evaluated again per query (~1 s each, most of this file's time)
    refresh(con)
    con.close()
    con = connect(db)  # read-only, reading the fresh derived tables
    assert freshness(con).fresh
    yield con
    con.close()


def _ops(con, model: str, deployment: str, workload: str) -> dict[str, tuple]:
    rows = con.execute(
        "select uid, op, role, flops, bytes, comm_bytes, scaleout_bytes, comm_s, time_s from op_sol "
        "where model = ? and deployment = ? and workload = ?",
        [model, deployment, workload],
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


# ------------------------------------------------------------------ context parallelism


def test_ulysses_and_ring_hold_the_same_data(mesh_db):
    """What 'equal memory traffic' means: both kinds hold 1/cp of every query, key, value,
    output and cache (Ulysses by heads after its all-to-all, ring by positions), so every op
    of the model reads and writes the same HBM bytes per device under both — and the
    attention kernels touch exactly half of the one-GPU bytes on cp = 2 (the ring's K/V blocks
    from the other rank are link traffic, as Ulysses' all-to-alls are).  Llama-3.1-8B, prefill
    of 8192 tokens: per layer the score kernel reads the queries (s·32 heads·128) and the keys
    (c·8·128), the apply reads the values and writes the output — all bf16."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    s = c = 8192
    per_layer_score = (s * cfg["num_attention_heads"] * d + c * cfg["num_key_value_heads"] * d) * BF16
    per_layer_apply = (c * cfg["num_key_value_heads"] * d + s * cfg["num_attention_heads"] * d) * BF16
    for workload in ("prefill_8k", "decode_b64_c32k"):
        ring = _ops(mesh_db, LLAMA, "2xH200-cp2-ring", workload)
        ulysses = _ops(mesh_db, LLAMA, "2xH200-cp2-ulysses", workload)
        compute_ops = {u for u, r in ring.items() if r[0] not in COLLECTIVES}
        assert compute_ops == {u for u, r in ulysses.items() if r[0] not in COLLECTIVES}
        for uid in compute_ops:
            assert ring[uid][3] == pytest.approx(ulysses[uid][3], rel=1e-12), uid  # HBM bytes
            assert ring[uid][2] == pytest.approx(ulysses[uid][2], rel=1e-12), uid  # FLOPs
    ring = _ops(mesh_db, LLAMA, "2xH200-cp2-ring", "prefill_8k")
    layers = cfg["num_hidden_layers"]
    assert ring["decoder/dense/self_attn.scores"][3] == pytest.approx(layers * per_layer_score / 2)
    assert ring["decoder/dense/self_attn.attn"][3] == pytest.approx(layers * per_layer_apply / 2)


def test_decode_cache_reads_and_caches_are_split_by_positions(mesh_db):
    """Decode at batch 64, context 32768: each cp rank keeps and reads half the K/V positions —
    64 · 32768 · 8 KV heads · 128 elements per layer for the keys, as many for the values."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    keys = 64 * 32768 * cfg["num_key_value_heads"] * d * cfg["num_hidden_layers"]
    for deployment in ("2xH200-cp2-ring", "2xH200-cp2-ulysses"):
        (reads,) = mesh_db.execute(
            "select sum(coef * power(64, e_B) * power(32768, e_c)) from int_device_terms "
            "where model = ? and deployment = ? and phase = 'decode' and quantity = 'cache_read_elements' "
            "and uid in ('decoder/dense/self_attn.scores', 'decoder/dense/self_attn.attn') and e_s = 0 and factor = 'none'",
            [LLAMA, deployment],
        ).fetchone()
        assert reads == pytest.approx(2 * keys / 2)
        (kv,) = mesh_db.execute(
            "select kv_bytes from device_memory where model = ? and deployment = ? and workload = 'decode_b64_c32k'",
            [LLAMA, deployment],
        ).fetchone()
        assert kv == pytest.approx(2 * keys * BF16 / 2)


def test_context_parallel_flops_times_cp_are_global(mesh_db):
    """Per-device FLOPs × cp = the one-GPU FLOPs for every op of a prefill that works on the
    split tokens (the attention pairs load-balanced); the head runs on the last position only,
    whole on one rank.  In decode the one new token is not split: only the attention kernels
    (over half the cached positions each) and the nodes that store the new token in a cache
    (on the rank that owns its position) are halved."""
    cached = {u for (u,) in mesh_db.execute("select uid from caches where model = ?", [LLAMA]).fetchall()}
    single = _ops(mesh_db, LLAMA, "1xH200-single", "prefill_8k")
    for deployment in ("2xH200-cp2-ring", "2xH200-cp2-ulysses"):
        cp = _ops(mesh_db, LLAMA, deployment, "prefill_8k")
        for uid, (op, _role, flops, *_rest) in single.items():
            expected = flops if op == "lm_head" else flops / 2
            assert cp[uid][2] == pytest.approx(expected, rel=1e-12), uid
    single = _ops(mesh_db, LLAMA, "1xH200-single", "decode_b64_c32k")
    cp = _ops(mesh_db, LLAMA, "2xH200-cp2-ring", "decode_b64_c32k")
    for uid, (op, _role, flops, *_rest) in single.items():
        halved = op in ("attention_score", "softmax", "attention_apply") or uid in cached
        assert cp[uid][2] == pytest.approx(flops / 2 if halved else flops, rel=1e-12), uid


def test_ulysses_and_ring_communicate_differently(mesh_db):
    """Link bytes per device on cp = 2, derived per layer (32 layers, bf16):

    prefill 8192 tokens — Ulysses: all-to-all of q, k, v and the output; a rank holds half of
    each and sends the other rank half of that: (8192·32·128 + 2·8192·8·128 + 8192·32·128)/2·1/2.
    Ring: each rank forwards its K and V blocks once around a ring of 2: 2·8192·8·128/2.
    decode at batch 64 — ring: all-reduce (2(n−1)/n = 1) of the log-sum-exp (64·32) and of the
    rescaled outputs (64·32·128); Ulysses: all-gather of the other rank's heads, 64·32·128/2.
    Both within one node: NVLink at 450 GB/s."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    h, kv, layers = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    d = cfg["hidden_size"] // h
    s = 8192
    expected = {
        ("2xH200-cp2-ulysses", "prefill_8k"): (s * h * d + 2 * s * kv * d + s * h * d) / 2 / 2,
        ("2xH200-cp2-ring", "prefill_8k"): 2 * s * kv * d / 2,
        ("2xH200-cp2-ring", "decode_b64_c32k"): 64 * h + 64 * h * d,
        ("2xH200-cp2-ulysses", "decode_b64_c32k"): 64 * h * d / 2,
    }
    for (deployment, workload), elements in expected.items():
        ops = _ops(mesh_db, LLAMA, deployment, workload)
        comm = [r for r in ops.values() if r[4] > 0]
        assert {r[1] for r in comm} == {"attention"}  # cp = 2 with tp 1: only the context-parallel collectives
        assert sum(r[4] for r in comm) == pytest.approx(layers * elements * BF16)
        assert sum(r[6] for r in comm) == pytest.approx(layers * elements * BF16 / NVLINK)
        assert all(r[5] == 0 for r in comm)  # nothing crosses nodes


# ------------------------------------------------------------------ pipeline parallelism


def _vllm_partition(layers: int, pp: int) -> list[int]:
    """vllm/distributed/utils.py get_pp_indices, restated: layers // pp each, the remainder
    one more each on the stages before the last, from the second-to-last backwards."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


@pytest.mark.parametrize(
    ("model", "config", "deployment", "pp"),
    [
        ("DeepSeek-V3", "deepseek-ai__DeepSeek-V3.json", "16xH200-tp8-pp2", 2),  # 61 → 31, 30
        ("DeepSeek-V3", "deepseek-ai__DeepSeek-V3.json", "16xH200-tp4-pp4", 4),  # 61 → 15, 15, 16, 15
        ("GLM-5.2", "zai-org__GLM-5.2.json", "16xH200-tp4-pp4", 4),  # 78 → 19, 20, 20, 19
        (LLAMA, "meta-llama__Meta-Llama-3.1-8B.json", "16xH200-tp4-pp4", 4),  # 32 → 8 each
    ],
)
def test_pipeline_stages_follow_vllms_partition(mesh_db, model, config, deployment, pp):
    layers = _config(config)["num_hidden_layers"]  # the base model: MTP layers are not in the pipeline
    rows = mesh_db.execute(
        "select stage, layers, first_layer, last_layer from pipeline_stages where model = ? and deployment = ? "
        "order by stage",
        [model, deployment],
    ).fetchall()
    parts = _vllm_partition(layers, pp)
    starts = [sum(parts[:i]) for i in range(pp)]
    assert rows == [(i, parts[i], starts[i], starts[i] + parts[i] - 1) for i in range(pp)]


def test_pipeline_memory_is_the_fullest_stage(mesh_db):
    """Llama-3.1-8B on 16×H200, TP8 × PP2: each stage holds 16 of the 32 layers' weights and
    caches; the first also the embedding, the last the final norm and the head.  The weights
    of one device of each stage are read from the TP8 one-stage deployment's per-tensor bytes
    (int_device_storage): layers ÷ 2 plus what the stage holds outside the layers.  KV at batch
    64, context 32768, from the config: 16 layers × K and V × 1 of 8 KV heads per TP rank × 128
    × 2 bytes per position."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    by_uid = dict(
        mesh_db.execute(
            "select uid, sum(total_bytes) from int_device_storage where model = ? and deployment = '8xH200-tp8' "
            "group by uid",
            [LLAMA],
        ).fetchall()
    )
    layer_bytes = sum(b for uid, b in by_uid.items() if uid.startswith("decoder/"))
    first = layer_bytes / 2 + by_uid["embed_tokens"]
    last = layer_bytes / 2 + by_uid["norm"] + by_uid["lm_head"]
    kv = 64 * 32768 * 16 * 2 * (cfg["num_key_value_heads"] // 8) * (cfg["hidden_size"] // 32) * BF16
    stage, weights, kv_bytes, fits, max_batch = mesh_db.execute(
        "select stage, weight_bytes, kv_bytes, fits, max_batch from device_memory "
        "where model = ? and deployment = '16xH200-tp8-pp2' and workload = 'decode_b64_c32k'",
        [LLAMA],
    ).fetchone()
    assert (stage, weights) == ((1, pytest.approx(last)) if last > first else (0, pytest.approx(first)))
    assert kv_bytes == pytest.approx(kv)
    one_stage = mesh_db.execute(
        "select kv_bytes, max_batch from device_memory "
        "where model = ? and deployment = '8xH200-tp8' and workload = 'decode_b64_c32k'",
        [LLAMA],
    ).fetchone()
    assert kv_bytes == pytest.approx(one_stage[0] / 2) and fits and max_batch > one_stage[1]


def test_pipeline_sends_every_value_crossing_a_boundary(mesh_db):
    """GLM-5.2 (78 layers) on 4 stages: 19 | 20 | 20 | 19 layers, boundaries after layers 18, 38
    and 58.  At each one the residual (batch 64 × hidden_size per decode token) crosses, and —
    when the first layer after it is an indexer-'shared' layer — the top-k selection of the last
    'full' layer before it (64 × index_topk indices), which the shared layer reads
    (config.indexer_types).  The stages have 4 GPUs each on nodes of 8: the boundary between
    stages 1 and 2 crosses nodes (NIC, 50 GB/s), the others stay in a node (NVLink, 450 GB/s).
    Messages are counted in the act dtype (bf16)."""
    cfg = _config("zai-org__GLM-5.2.json")
    types = cfg["indexer_types"]
    parts = _vllm_partition(cfg["num_hidden_layers"], 4)
    boundaries = [sum(parts[: i + 1]) - 1 for i in range(3)]
    expected = {}
    for k, last in enumerate(boundaries):
        expected[f"pipeline/{k}-{k + 1}/hidden@{last}"] = 64 * cfg["hidden_size"] * BF16
        if types[last + 1] == "shared":
            full = max(i for i in range(last + 1) if types[i] == "full")
            expected[f"pipeline/{k}-{k + 1}/topk@{full}"] = 64 * cfg["index_topk"] * BF16
    assert any("topk" in uid for uid in expected)  # the config does share across these boundaries
    sends = {
        uid: (comm, scaleout, comm_s)
        for uid, comm, scaleout, comm_s in mesh_db.execute(
            "select uid, comm_bytes, scaleout_bytes, comm_s from op_sol where model = 'GLM-5.2' "
            "and deployment = '16xH200-tp4-pp4' and workload = 'decode_b64_c32k' and op = 'p2p'"
        ).fetchall()
    }
    assert set(sends) == set(expected)
    for uid, nbytes in expected.items():
        crosses = uid.startswith("pipeline/1-2/")
        assert sends[uid] == (
            pytest.approx(nbytes),
            pytest.approx(nbytes if crosses else 0),
            pytest.approx(nbytes / (NIC if crosses else NVLINK)),
        )


def test_a_pipeline_step_is_every_stage_in_turn_plus_the_sends(mesh_db):
    """No overlap: one micro-batch goes through stage after stage, so a TP8 × PP2 step is the
    TP8 one-stage step (the same per-op work on one device of each stage) plus the residual sent
    once between the stages (batch × hidden_size bf16 per decode token, over the NIC: each
    stage is a node of 8 H200); its tokens/s per GPU counts all 16 GPUs."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    rows = dict(
        (d, (t, tps))
        for d, t, tps in mesh_db.execute(
            "select deployment, time_s, tokens_per_s_per_gpu from step_sol where model = ? "
            "and workload = 'decode_b64_c32k' and deployment in ('8xH200-tp8', '16xH200-tp8-pp2')",
            [LLAMA],
        ).fetchall()
    )
    send = 64 * cfg["hidden_size"] * BF16 / NIC
    assert rows["16xH200-tp8-pp2"][0] == pytest.approx(rows["8xH200-tp8"][0] + send, rel=1e-12)
    assert rows["16xH200-tp8-pp2"][1] == pytest.approx(64 / rows["16xH200-tp8-pp2"][0] / 16)


# ------------------------------------------------------------------ links across nodes


def test_a_collective_is_priced_by_the_link_its_group_spans(mesh_db):
    """The same TP8 all-reduce of a Llama decode step (batch 64: 64 × 4096 bf16 = 524288 bytes,
    ring all-reduce 2·7/8 of it per device) on one node of 8 H200 moves at NVLink's 450 GB/s;
    with the 8 GPUs on 2 nodes of 4 every ring step crosses a node: the NIC's 50 GB/s."""
    cfg = _config("meta-llama__Meta-Llama-3.1-8B.json")
    nbytes = 2 * 7 / 8 * 64 * cfg["hidden_size"] * BF16
    for deployment, link in (("8xH200-tp8", NVLINK), ("8xH200-tp8-2nodes", NIC)):
        ops = _ops(mesh_db, LLAMA, deployment, "decode_b64_c32k")
        # the layers' reductions; the vocab-parallel embedding's one all-reduce per step (issue
        # 12 item 5, tests/test_vocab_and_expert_tp.py) is role 'embedding'
        reduces = [r for r in ops.values() if r[0] == "all_reduce" and r[1] != "embedding"]
        assert len(reduces) == 2  # attention and MLP residuals (per layer; 32 layers in each row)
        for r in reduces:
            assert r[4] == pytest.approx(cfg["num_hidden_layers"] * nbytes)
            assert r[6] == pytest.approx(cfg["num_hidden_layers"] * nbytes / link)
            assert r[5] == (0 if link == NVLINK else pytest.approx(r[4]))


def test_an_all_to_all_crossing_nodes_sends_its_off_node_share_over_the_nic(mesh_db):
    """Qwen3-30B-A3B expert dispatch, DP8 × EP8, decode at batch 64: each rank holds 64/8 tokens
    and sends each token once to every other rank holding one of its top-8 experts (of 128, 16
    per rank).  A rank is missed by a token with probability C(112, 8) / C(128, 8), so a token
    reaches D = 8 · (1 − C(112, 8)/C(128, 8)) ≈ 3.96 ranks, of which its own (1/8 of them in
    expectation) needs no send: D · 7/8 vectors of hidden_size 2048 per token and layer.  On
    one node all 7 peers are on NVLink.  On 2 nodes of 4, 3 peers share the node and 4 do not:
    3/7 of the bytes at 450 GB/s and 4/7 at 50 GB/s at the same time — the NIC part bounds it."""
    cfg = _config("Qwen__Qwen3-30B-A3B.json")
    experts, k, ranks = cfg["num_experts"], cfg["num_experts_per_tok"], 8
    reached = ranks * (1 - math.comb(experts - experts // ranks, k) / math.comb(experts, k))
    per_layer = (64 // 8) * reached * (1 - 1 / ranks) * cfg["hidden_size"] * BF16
    nbytes = cfg["num_hidden_layers"] * per_layer
    for deployment, expected_s in (
        ("8xH200-dp8-ep8", nbytes / NVLINK),
        ("8xH200-dp8-ep8-2nodes", max(3 / 7 * nbytes / NVLINK, 4 / 7 * nbytes / NIC)),
    ):
        ops = _ops(mesh_db, "Qwen3-30B-A3B", deployment, "decode_b64_c32k")
        (dispatch,) = [r for uid, r in ops.items() if uid.endswith("mlp.dispatch#all_to_all[0]")]
        assert dispatch[4] == pytest.approx(nbytes)
        assert dispatch[6] == pytest.approx(expected_s)


def test_ep16_over_two_nodes_of_eight(mesh_db):
    """The default 16×H200 deployment (derived: 2 nodes of 8) spreads experts over both nodes:
    EP16 has 8 members per node; TP8 stays inside a node.  A token is already on the 8 GPUs of
    its TP group (its node), so every rank it is sent to is on the other node: the all-to-all
    goes over the NIC whole."""
    links = dict(
        ((g, (members, crosses)))
        for g, members, crosses in mesh_db.execute(
            'select "group", members_per_node, crosses_nodes from int_deployment_links '
            "where deployment = '16xH200-tp8-dp2-ep16' and \"group\" in ('moe_ep', 'attention')"
        ).fetchall()
    )
    assert links == {"moe_ep": (8, True), "attention": (8, False)}
    (nodes,) = mesh_db.execute(
        "select nodes from int_deployment_mesh where deployment = '16xH200-tp8-dp2-ep16'"
    ).fetchone()
    assert nodes == 2
    rows = mesh_db.execute(
        "select comm_bytes, scaleout_bytes, link from op_sol where model = 'DeepSeek-V3' "
        "and deployment = '16xH200-tp8-dp2-ep16' and workload = 'decode_b64_c32k' and op = 'all_to_all'"
    ).fetchall()
    assert rows and all(so == pytest.approx(comm) and link == "scale-out" for comm, so, link in rows)


# ------------------------------------------------------------------ validation


def test_bad_mesh_degrees_are_reported_with_the_fix(models_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(models_db, db)
    con = duckdb.connect(str(db))
    bad = [
        ("cp-kind", 8, 4, 1, 2, "none", None),
        ("cp-typo", 8, 4, 1, 2, "rign", None),
        ("nodes-3", 8, 8, 1, 1, "none", 3),
        ("nodes-1-of-16", 16, 8, 2, 1, "none", 1),
        ("cp-too-many", 8, 8, 1, 2, "ulysses", None),
    ]
    insert_deployments(
        con,
        [
            {**BF16_H200, "deployment": name, "gpus": gpus, "tp": tp, "dp": dp, "ep": 1, "moe_tp": gpus}
            | {"pp": 1, "cp": cp, "cp_kind": kind, "nodes": nodes}
            for name, gpus, tp, dp, cp, kind, nodes in bad
        ],
    )
    found: dict[str, set[str]] = {}
    for deployment, rule, problem, fix in con.execute(
        "select deployment, rule, problem, fix from deployment_checks"
    ).fetchall():
        found.setdefault(deployment, set()).add(rule)
        assert problem and fix
    assert found == {
        "cp-kind": {"cp kind"},
        "cp-typo": {"cp kind"},
        "nodes-3": {"nodes"},
        "nodes-1-of-16": {"nodes"},
        "cp-too-many": {"attention degrees"},
    }
    (problem,) = con.execute("select problem from deployment_checks where deployment = 'cp-too-many'").fetchone()
    assert problem == "tp × cp × dp × pp = 8 × 2 × 1 × 1 = 16 GPUs, the deployment has 8"
    (problem,) = con.execute("select problem from deployment_checks where deployment = 'nodes-1-of-16'").fetchone()
    assert problem == "16.0 GPUs per node, the scale-up domain of the GPU is 8.0"


def test_layouts_a_model_cannot_run_are_named(mesh_db):
    """Ulysses splits heads over tp × cp (4 × 2 = 8 on the default 8xH200-tp4-cp2-ulysses):
    Llama-3.1-8B's 32 query and 8 KV heads split; Qwen2.5-7B's 28 query heads do not, nor its 4
    KV heads; DeepSeek-V3's MLA latent (one cached 'head', decode) cannot be split by heads in
    either of its two attention layer groups.  64 pipeline stages exceed every one of these
    models' layers (32, 28, 61 in their configs)."""
    qwen = _config("Qwen__Qwen2.5-7B.json")
    assert (qwen["num_attention_heads"], qwen["num_key_value_heads"]) == (28, 4)
    rows = mesh_db.execute(
        "select model, deployment, rule, problem from parallel_fit_checks where model in (?, 'Qwen2.5-7B', 'DeepSeek-V3') "
        "and deployment in ('8xH200-tp4-cp2-ulysses', '64xH200-pp64') order by all",
        [LLAMA],
    ).fetchall()
    rules = sorted((m, d, r) for m, d, r, _ in rows)
    assert rules == sorted(
        [
            ("DeepSeek-V3", "8xH200-tp4-cp2-ulysses", "ulysses kv heads"),
            ("DeepSeek-V3", "8xH200-tp4-cp2-ulysses", "ulysses kv heads"),
            ("Qwen2.5-7B", "8xH200-tp4-cp2-ulysses", "ulysses heads"),
            ("Qwen2.5-7B", "8xH200-tp4-cp2-ulysses", "ulysses kv heads"),
            *((m, "64xH200-pp64", "pipeline stages") for m in (LLAMA, "Qwen2.5-7B", "DeepSeek-V3")),
        ]
    )
    problems = {(m, r): p for m, _, r, p in rows}
    assert problems[("Qwen2.5-7B", "ulysses heads")] == (
        "decoder/dense/self_attn.scores: 28 query heads do not split over tp × cp = 8"
    )
    assert problems[(LLAMA, "pipeline stages")] == "pp = 64 stages for 32 layers: 32 stages hold no layer"
    (empty,) = mesh_db.execute(
        "select count(*) from pipeline_stages where model = ? and deployment = '64xH200-pp64' and empty", [LLAMA]
    ).fetchone()
    assert empty == 64 - 32
