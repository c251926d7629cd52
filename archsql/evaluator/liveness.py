"""Liveness: which materialized activations are held in memory while each op runs.

The model (documented in the ``liveness`` table contract and the activation views):

- A node's output occupies memory when the node writes it (``write_elements`` ≠ 0) and is
  freed after its last reader has run.  An op that writes nothing (a reshape, a slice, the
  attention scores a flash-attention kernel keeps on chip) aliases its inputs: its readers
  keep those inputs alive.  A tensor that is a decode cache (``caches``, or the tensor a
  cached view shows) lives in the cache and is counted there, not here.
- Order is the walk order of one phase's Program: the nodes of one block template are one
  layer, and layers run one after another, so a layer's intermediates are freed before the
  next layer starts.  A value that crosses layers (the residual stream, a cross-layer
  stream) read by another template, or by the next layer of its own template, is live from
  its write to the end of its layer and from the start of the reader's layer to the read.
- A reader with several possible producers on one port (the first layer's input or the
  previous layer's output) holds one of them: the one of its own template when there is one.

Routed experts' tensors are one row per expert node; the views multiply by the experts one
device runs in a layer.  Nothing here depends on a deployment or a workload: the views read
each live tensor's per-device size through its layout at any workload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from archsql.evaluator.walk import Walk


def live_tensors(walk: Walk, sources: Callable) -> list[tuple[str, str]]:
    """(uid, live_uid) pairs of one phase: while ``uid`` runs, ``live_uid``'s output is held.
    ``sources(walk, node, ref)`` gives the producer uids of one input reference."""
    order = list(walk.results)
    pos = {uid: i for i, uid in enumerate(order)}

    def layer(uid: str) -> tuple:
        node = walk.results[uid].node
        return (node.stack, node.template) if node.stack is not None else (uid,)

    span: dict[tuple, list[int]] = {}
    for uid in order:
        span.setdefault(layer(uid), []).append(pos[uid])
    first = {key: min(v) for key, v in span.items()}
    last = {key: max(v) for key, v in span.items()}

    # the materialized tensors behind each node's output (a non-writing op aliases its inputs)
    inputs: dict[str, list[str]] = {}
    alias: dict[str, frozenset[str]] = {}
    for uid in order:
        res = walk.results[uid]
        srcs = []
        for ref in res.node.inputs:
            found = [s for s, _ in sources(walk, res.node, ref) if s is not None and s in walk.results]
            own = [s for s in found if layer(s) == layer(uid)]
            if found:
                srcs.append((own or found)[0])
        inputs[uid] = srcs
        writes = res.io[1] if res.io else 0
        alias[uid] = frozenset({uid}) if writes != 0 else frozenset().union(*(alias.get(s, ()) for s in srcs))

    # a cache entry's memory is the cache (a view of a projection caches the projection)
    cached = frozenset().union(*(alias[uid] for uid, res in walk.results.items() if res.caches))
    intervals: dict[str, list[tuple[int, int]]] = {uid: [(pos[uid], pos[uid])] for uid in order}
    for uid in order:
        for src in inputs[uid]:
            for t in alias.get(src, ()):
                intervals[t].extend(_held(t, uid, pos, layer, first, last))
    out: list[tuple[str, str]] = []
    for t, spans in intervals.items():
        if t in cached or t not in alias.get(t, ()):
            continue
        for k in sorted(set(_positions(spans))):
            out.append((order[k], t))
    return out


def _held(t: str, reader: str, pos, layer, first, last) -> list[tuple[int, int]]:
    """Positions over which ``t`` is held so that ``reader`` can read it."""
    if layer(t) == layer(reader) and pos[reader] > pos[t]:
        return [(pos[t], pos[reader])]
    return [(pos[t], last[layer(t)]), (first[layer(reader)], pos[reader])]


def _positions(spans: Iterable[tuple[int, int]]) -> Iterable[int]:
    for a, b in spans:
        yield from range(a, b + 1)
