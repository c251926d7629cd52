"""The measurement plan: the unique kernel shapes one step of a model runs.

:func:`plan` evaluates the model (the same Analysis tables the store holds), binds the
workload's runtime symbols (B requests, s new tokens, c context) into the evaluated
``shapes`` table and maps each node onto a harness op kind, deduplicated — so one device
measures every distinct shape a run would hit:

==============================  ================================================================
node op                         planned shape
==============================  ================================================================
linear, lm_head, router         gemm: m = product of the output's leading axes, n = out features,
                                k = in features (the node's weight [out, in])
expert_linear                   grouped_gemm: tokens = B·s, experts (the component's router
                                output), topk, n, k (the expert weight), balanced routing
attention_score                 attention: batch, q_len = s, kv_len = c, heads (scores axis 1),
                                kv_heads and head_dim (the key input), v_head_dim (the
                                attention_apply output), window_size (the node's window factor)
rmsnorm                         rmsnorm: tokens = product of the leading axes, hidden = last axis
==============================  ================================================================

Every other node (element-wise, views, routing, sparse or recurrent kernels, collectives)
is listed as unplanned.  Plans are for TP = 1: per-device shapes of a parallel deployment
come from the deployment's layouts (the deployments work) and will be read through them;
collectives are measured separately.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from archsql.errors import CorpusError, Issue, unknown_name
from archsql.kernel_corpus.harness import Shape

GEMM_OPS = ("linear", "lm_head", "router")
EXPERT_OPS = ("expert_linear", "stacked_expert_linear")


@dataclass
class Plan:
    model: str
    phase: str
    workload: dict[str, int]
    shapes: list[Shape] = field(default_factory=list)
    unplanned: dict[str, int] = field(default_factory=dict)  # op -> nodes not planned


def workload(name: str) -> tuple[str, dict[str, int]]:
    """(phase, {B, s, c}) of a named workload of the store's default workloads table."""
    from archsql.store import DEFAULT_WORKLOADS

    for wname, phase, batch, new_tokens, context in DEFAULT_WORKLOADS:
        if wname == name:
            return phase, {"B": batch, "s": new_tokens, "c": context}
    message, hint = unknown_name("workload", name, [w[0] for w in DEFAULT_WORKLOADS])
    raise CorpusError(message, [Issue(message, hint=hint)])


def plan(model: str, phase: str, batch: int, new_tokens: int, context: int) -> Plan:
    """The deduplicated kernel shapes of one ``phase`` step of ``model`` at TP = 1."""
    from archsql.evaluator import evaluate

    if context < new_tokens:
        raise CorpusError(f"context ({context}) must be at least the new tokens ({new_tokens})")
    tables = evaluate(model).tables
    bind = {"B": batch, "s": new_tokens, "c": context}
    nodes = [r for r in tables["nodes"].to_pylist() if r["phase"] == phase]
    shapes: dict[str, list[int]] = defaultdict(list)
    for r in tables["shapes"].to_pylist():
        if r["phase"] == phase:
            shapes[r["uid"]].append((r["axis"], r["size"] if r["size"] is not None else bind.get(r["symbol"])))
    dims = {uid: [size for _, size in sorted(axes)] for uid, axes in shapes.items()}
    weights = {r["uid"]: r["shape"] for r in tables["weights"].to_pylist() if r["tensor"] == "weight"}
    count = {r["uid"]: r["count"] for r in tables["instances"].to_pylist()}
    inputs: dict[str, dict[int, str]] = defaultdict(dict)
    for r in tables["edges"].to_pylist():
        if r["phase"] == phase and r["src_uid"] is not None:
            inputs[r["dst_uid"]][r["port"]] = r["src_uid"]
    windows = {
        r["uid"]: r["factor_arg"]
        for r in tables["terms"].to_pylist()
        if r["phase"] == phase and r["factor"] in ("window_pairs", "min_c") and r["factor_arg"]
    }
    by_component: dict[str, dict[str, str]] = defaultdict(dict)
    for n in nodes:
        by_component[_component(n["uid"])][n["op"]] = n["uid"]

    planned: dict[tuple, Shape] = {}
    unplanned: dict[str, int] = defaultdict(int)
    for n in nodes:
        uid, op = n["uid"], n["op"]
        out = dims.get(uid)
        shape = None
        if op in GEMM_OPS and uid in weights and out and None not in out:
            shape = Shape.of("gemm", m=_prod(out[:-1]), n=weights[uid][0], k=weights[uid][1])
        elif op in EXPERT_OPS and uid in weights and out and None not in out:
            router = by_component[_component(uid)].get("router")
            experts = dims[router][-1] if router in dims else None
            if experts:
                shape = Shape.of(
                    "grouped_gemm",
                    tokens=_prod(out[:-2]),
                    topk=out[-2],
                    experts=experts,
                    n=weights[uid][-2],
                    k=weights[uid][-1],
                    routing="balanced",
                )
                count[uid] = count.get(uid, experts) // experts  # one launch per layer, not per expert
        elif op == "attention_score" and out and None not in out:
            key = dims.get(inputs[uid].get(1))
            apply = by_component[_component(uid)].get("attention_apply")
            v_dim = dims[apply][-1] if apply in dims else None
            if key and None not in key:
                shape = Shape.of(
                    "attention",
                    phase,
                    batch=batch,
                    q_len=new_tokens,
                    kv_len=context,
                    heads=out[1],
                    kv_heads=key[-2],
                    head_dim=key[-1],
                    v_head_dim=v_dim if v_dim != key[-1] else None,
                    window_size=windows.get(uid),
                )
        elif op == "rmsnorm" and out and None not in out:
            shape = Shape.of("rmsnorm", tokens=_prod(out[:-1]), hidden=out[-1])
        if shape is None:
            unplanned[op] += 1
            continue
        seen = planned.get(shape.key)
        launches = count.get(uid, 1)
        if seen is None:
            planned[shape.key] = Shape(shape.op_kind, shape.fields, shape.phase, launches, (uid,))
        else:
            planned[shape.key] = Shape(
                shape.op_kind, shape.fields, shape.phase, seen.count + launches, (*seen.nodes, uid)
            )
    ordered = sorted(planned.values(), key=lambda s: (s.op_kind, str(s.fields)))
    return Plan(model, phase, bind, ordered, dict(sorted(unplanned.items())))


def _component(uid: str) -> str:
    """The component instance a node belongs to: its uid up to the last '.'."""
    return uid.rsplit(".", 1)[0] if "." in uid else uid


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out
