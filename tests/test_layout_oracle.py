"""The layout oracle: per-device quantities summed over the mesh equal the global quantities,
replicas counted as the layout says — for layouts drawn by hypothesis, on dense, MoE, MLA
and hybrid (gated DeltaNet, Mamba2) models.

What is compared, precisely.  For a deployment of G GPUs and a workload, for every op o of
the step (collective nodes included) and every quantity q of it — FLOPs, activation
elements read (per input port) and written, decode-cache elements read, cache elements
kept, weight bytes as stored in the deployment's weight profile — the views give q_dev(o),
the value on one device (int_device_op_values, int_device_weights).  The oracle computes,
in Python and from the evaluated tables only (terms, instances, layouts, edges, weights,
storage bytes — never an int_device_* view):

  * q(o), the op's global value: its per-instance term rows × instance count at the
    workload (factors by archsql.evaluator.factors.factor_value);
  * the groups the layout says split the tensor q is about: FLOPs — the output's sharded
    axes and pending sums (the op's arithmetic); writes and kept caches — the output's
    sharded axes (a pending sum is whole on every device); reads of port p — the input as
    the op consumes it (layouts tensor 'in<p>'); decode-cache reads — the cached tensor's
    output axes; weight bytes — the weight's sharded axes; plus, for routed experts, the
    group their copies are spread over;
  * replicas(o, q) = G / Π_g n_g over those groups, with n_g the group's degree — or, under
    the fit rule (P whole pieces on n devices, n ∤ P), P / ceil(P / n) for that group, the
    pieces the fullest device holds (a fused axis: its segments' total over the fullest
    device's share of each segment).

and asserts G × q_dev(o) = q(o) × replicas(o, q): summed over the mesh, every op's work and
bytes are the global ones, each replicated piece counted once per replica.  A second check
ties the oracle to the global views: Σ_o q(o) for FLOPs equals the `flops` view of the
model at the workload (no op lost or counted twice).

A routed expert's weight bytes are those of the experts the step touches: the device's share
times 1 − (1 − k/E)^T (uniform routing, T the tokens its input holds on one device).

Weight bytes are compared in a BF16 profile, where every stored tensor follows its weight
axes exactly; block-scaled profiles keep ceil(slab / block) scale rows per device, which is
at least the even share (tests/test_device_memory.py checks those by hand).

Deployments and workloads are parameter rows written into one copy of the catalog store;
DEPLOYMENT draws the columns the oracle varies — add a parallelism there (cp, pp, …) and the
oracle covers it, reading the degrees of its groups from int_deployment_groups.
"""

from __future__ import annotations

import math
import shutil
from collections import defaultdict

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsql.evaluator.factors import factor_value
from archsql.store import insert_deployments, keep_deployments

MODELS = (
    "Meta-Llama-3.1-8B",  # dense GQA
    "Qwen3-30B-A3B",  # MoE, 4 KV heads (the fit rule beyond tp 4)
    "DeepSeek-V2-Lite",  # MLA + MoE with shared experts
    "Qwen3.5-35B-A3B",  # hybrid: gated DeltaNet (fused qkv) + gated attention + MoE
    "Nemotron-H-56B-Base-8K",  # hybrid: Mamba2 (fused in_proj) + attention + dense MLP
)
NAME = "oracle"

# the deployment columns every oracle row fixes (a parallelism added to DEPLOYMENT below
# overrides its column here)
FIXED = {
    "gpu": "H200 SXM",
    "pp": 1,
    "cp": 1,
    "cp_kind": "none",
    "nodes": None,
    "weight_dtype": "bf16",
    "act_dtype": "bf16",
    "kv_dtype": "bf16",
    "usable_memory_fraction": 0.9,
    "weight_profile": "bf16",
}


def _divisors(n: int) -> list[int]:
    return [d for d in (1, 2, 4, 8, 16) if n % d == 0]


@st.composite
def DEPLOYMENT(draw) -> dict:
    """Attention runs tp × cp × dp and MoE layers ep × moe_tp on the same G GPUs (context
    parallelism of either kind; pipeline stages are not drawn yet: pp stays 1)."""
    gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
    tp = draw(st.sampled_from(_divisors(gpus)))
    cp = draw(st.sampled_from([d for d in _divisors(gpus // tp) if d <= 4]))
    cp_kind = draw(st.sampled_from(["ring", "ulysses"])) if cp > 1 else "none"
    ep = draw(st.sampled_from(_divisors(gpus)))
    return {
        "gpus": gpus,
        "tp": tp,
        "cp": cp,
        "cp_kind": cp_kind,
        "dp": gpus // tp // cp,
        "ep": ep,
        "moe_tp": gpus // ep,
    }


@st.composite
def WORKLOAD(draw) -> dict:
    phase = draw(st.sampled_from(["prefill", "decode"]))
    batch = draw(st.integers(1, 64))
    if phase == "prefill":
        s = draw(st.integers(1, 4096))
        return {"phase": phase, "batch": batch, "new_tokens": s, "context": s}
    return {"phase": phase, "batch": batch, "new_tokens": 1, "context": draw(st.integers(1, 65536))}


@pytest.fixture(scope="module")
def store(store_of, tmp_path_factory):
    """A copy of a store of the oracle's MODELS: each example writes its deployment and
    workload into it and reads one model's per-device values."""
    db = tmp_path_factory.mktemp("oracle") / "store.duckdb"
    shutil.copy(store_of(*MODELS), db)
    con = duckdb.connect(str(db))
    # only the example's deployment and workload: the live views read per example compute no
    # other deployment's or workload's rows (~0.75 -> 0.45 s CPU an example)
    keep_deployments(con, [])
    con.execute("delete from workloads")
    yield con
    con.close()


_TABLES: dict[str, dict] = {}


def _tables(con, model: str) -> dict:
    """The evaluated rows of one model the oracle reads (tables, not per-device views)."""
    if model in _TABLES:
        return _TABLES[model]
    q = lambda sql: con.execute(sql, [model]).fetchall()  # noqa: E731
    t: dict = {}
    t["terms"] = q(
        "select phase, uid, quantity, port, coef, e_B, e_s, e_c, factor, factor_arg from terms where model = ?"
    )
    t["count"] = dict(q("select uid, count from instances where model = ?"))
    t["active"] = dict(q("select uid, active_count from instances where model = ?"))
    # the groups splitting the tokens a node routes: its input's batch and sequence axes
    t["token_splits"] = defaultdict(dict)
    for phase, uid, group, parts, segments in q(
        'select phase, uid, "group", parts, segments from layouts '
        "where model = ? and tensor = 'in0' and axis in (0, 1) and placement = 'S'"
    ):
        t["token_splits"][(phase, uid)][group] = (parts, segments)
    t["base"] = {
        (p, u)
        for p, u, r in q(
            "select n.phase, n.uid, s.role from nodes as n left join stacks as s "
            "on s.model = n.model and s.stack = n.stack where n.model = ? and n.role <> 'mtp'"
        )
        if r != "mtp"
    }
    t["collective"] = {(p, u): c for p, u, c in q("select phase, uid, consumer_uid from collectives where model = ?")}
    splits = defaultdict(dict)  # (phase, uid, tensor) -> {group: (placement, parts, segments)}
    for phase, uid, tensor, placement, group, parts, segments in q(
        'select phase, uid, tensor, placement, "group", parts, segments from layouts where model = ?'
    ):
        key = (phase, uid, tensor)
        assert group not in splits[key] or placement == "P" or splits[key][group][0] == "P", (key, group)
        if group not in splits[key] or placement == "S":
            splits[key][group] = (placement, parts, segments)
    t["splits"] = splits
    # each caching node's storage rule (caches.dtype: kv | act | a fixed dtype, + scale)
    t["cache_rule"] = {
        u: (d, sd, sb) for u, d, sd, sb in q("select uid, dtype, scale_dtype, scale_block from caches where model = ?")
    }
    t["dtype_bytes"] = dict(con.execute("select dtype, bytes from dtypes").fetchall())
    t["cache_src"] = dict(
        ((p, u), s) for p, u, s in q("select phase, dst_uid, src_uid from edges where model = ? and port = 1")
    )
    t["weights"] = q(
        "select w.uid, w.tensor, sum(s.bytes * s.copies) from weights as w join int_storage_bytes as s "
        "on s.model = w.model and s.uid = w.uid and s.tensor = w.tensor "
        "where w.model = ? and s.profile = 'bf16' and w.streamed group by w.uid, w.tensor"
    )
    _TABLES[model] = t
    return t


def _effective(degree: int, parts, segments) -> float:
    """How many times smaller the fullest device's share is than the whole (the fit rule)."""
    if segments:
        local = sum(s["size"] // s["parts"] * math.ceil(s["parts"] / degree) for s in segments)
        return sum(s["size"] for s in segments) / local
    if parts:
        return parts / math.ceil(parts / degree)
    return degree


def _split(t, degrees, phase, uid, tensor, placements=("S",)) -> float:
    """Π over the groups splitting one tensor of a node (with the given placements) and the
    group its copies are spread over (routed experts) of their effective degree — each group
    once: G / this = the tensor's replicas on the mesh."""
    groups = {g: v for g, v in t["splits"].get((phase, uid, tensor), {}).items() if v[0] in placements}
    groups.update(t["splits"].get((phase, uid, "copies"), {}))
    d = 1.0
    for group, (_, parts, segments) in groups.items():
        d *= _effective(degrees[group], parts, segments)
    return d


def _touched_share(t, degrees, phase: str, uid: str, tokens: float) -> float:
    """The share of a device's routed experts whose weights a step reads: a token picks k of
    the E experts, so under uniform routing an expert is untouched by T tokens with
    probability (1 − k/E)^T and touched with 1 − (1 − k/E)^T; T is the tokens the node's
    input holds on one device.  1 for a node that is not a routed expert."""
    copies = t["splits"].get((phase, uid, "copies"), {})
    if not copies:
        return 1.0
    experts = next(parts for _, parts, _ in copies.values())
    top_k = experts * t["active"][uid] / t["count"][uid]
    split = 1.0
    for group, (parts, segments) in t["token_splits"].get((phase, uid), {}).items():
        split *= _effective(degrees[group], parts, segments)
    return 1.0 - (1.0 - top_k / experts) ** (tokens / split)


def _cache_bytes(t, uid, act_bytes: float, kv_bytes: float) -> float:
    """Bytes per element of the cache declared on ``uid`` under its storage rule: kv → the kv
    dtype, act → the act dtype, a fixed dtype → its own bytes, plus a scale per block; a node
    without a cache of its own (a concat of cached parts) → the kv dtype."""
    rule, scale_dtype, scale_block = t["cache_rule"].get(uid, ("kv", None, None))
    base = {"kv": kv_bytes, "act": act_bytes}.get(rule) or t["dtype_bytes"][rule]
    return base + (t["dtype_bytes"][scale_dtype] / scale_block if scale_dtype else 0.0)


def _expected(t, degrees, w, gpus: int, act_bytes: float, kv_bytes: float):
    """Per op and quantity kind (flops, hbm bytes, cache bytes): the global value and the sum
    over the mesh, Σ_parts global part × replicas(part) — the oracle's side, from the tables."""
    phase, b, s, c = w["phase"], w["batch"], w["new_tokens"], w["context"]
    ops: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for ph, uid, quantity, port, coef, eb, es, ec, factor, arg in t["terms"]:
        if ph != phase or quantity == "comm_elements":
            continue
        owner = t["collective"].get((ph, uid), uid)
        if (ph, owner) not in t["base"]:
            continue
        value = coef * t["count"][uid] * b**eb * s**es * c**ec * factor_value(factor, arg, s, c)
        if quantity == "flops":
            tensor, placements, bytes_ = "out", ("S", "P"), 1.0
        elif quantity == "read_elements":
            tensor, placements, bytes_ = f"in{port}", ("S",), act_bytes
        elif quantity == "write_elements":
            tensor, placements, bytes_ = "out", ("S",), act_bytes
        elif quantity == "cache_elements":
            tensor, placements, bytes_ = "out", ("S",), _cache_bytes(t, uid, act_bytes, kv_bytes)
        else:  # cache_read_elements: split like the cached tensor, in the bytes it is stored in
            src_cache = uid if uid in t["cache_rule"] else t["cache_src"].get((ph, uid))
            tensor, placements, bytes_ = "out", ("S",), _cache_bytes(t, src_cache, act_bytes, kv_bytes)
        src = t["cache_src"].get((ph, uid)) if quantity == "cache_read_elements" else None
        split = _split(t, degrees, ph, src or uid, tensor, placements)
        kind = "cache" if quantity == "cache_elements" else ("flops" if quantity == "flops" else "hbm")
        ops[uid][kind] += value * bytes_
        ops[uid][kind + "_mesh"] += value * bytes_ * gpus / split
    for uid, tensor, total in t["weights"]:
        if (phase, uid) not in t["base"]:
            continue
        split = _split(t, degrees, "prefill", uid, tensor)
        # routed experts: the weights of the experts the step touches (on every device alike)
        touched = _touched_share(t, degrees, phase, uid, b * s)
        ops[uid]["hbm"] += total * touched
        ops[uid]["hbm_mesh"] += total * gpus / split * touched
    return ops


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(MODELS), deployment=DEPLOYMENT(), workload=WORKLOAD())
def test_per_device_summed_over_the_mesh_is_global(store, model, deployment, workload):
    con = store
    row = {**FIXED, **deployment, "deployment": NAME}
    con.execute("delete from deployments where deployment = ?", [NAME])
    con.execute("delete from deployment_mesh where deployment = ?", [NAME])
    con.execute("delete from workloads where workload = ?", [NAME])
    insert_deployments(con, [row])
    con.execute(
        "insert into workloads by name select ? as workload, ? as phase, ? as batch, ? as new_tokens, ? as context",
        [NAME, workload["phase"], workload["batch"], workload["new_tokens"], workload["context"]],
    )
    assert con.execute("select problem from deployment_checks where deployment = ?", [NAME]).fetchall() == []
    degrees = dict(
        con.execute('select "group", degree from int_deployment_groups where deployment = ?', [NAME]).fetchall()
    )
    gpus = deployment["gpus"]
    t = _tables(con, model)
    expected = _expected(t, degrees, workload, gpus, act_bytes=2.0, kv_bytes=2.0)
    got = {
        uid: (flops, hbm, cache)
        for uid, flops, hbm, cache in con.execute(
            "select uid, flops, hbm_bytes, cache_bytes from int_device_op_values "
            "where model = ? and deployment = ? and workload = ?",
            [model, NAME, NAME],
        ).fetchall()
    }
    for uid in set(got) | set(expected):  # collective nodes: no FLOPs, no HBM bytes (comm only)
        e = expected.get(uid, {})
        flops, hbm, cache = got.get(uid, (0.0, 0.0, 0.0))
        for kind, dev in (("flops", flops), ("hbm", hbm), ("cache", cache)):
            # Σ over the mesh of the per-device value = global × replicas (as the layout says)
            assert gpus * dev == pytest.approx(e.get(kind + "_mesh", 0.0), rel=1e-9, abs=1e-6), (model, uid, kind, row)
    (flops_view,) = con.execute("select flops from flops where model = ? and workload = ?", [model, NAME]).fetchone()
    assert sum(e["flops"] for e in expected.values()) == pytest.approx(flops_view, rel=1e-12)
