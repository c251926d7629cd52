"""Context parallelism in the layout pass: the sequence split over the ``cp`` group.

The rules (called from :func:`archsql.evaluator.layouts.propagate`), all independent of
degrees, as every layout is:

* **Tokens.**  In prefill the model inputs' token axis ``s`` is split over ``cp`` next to
  the requests over ``dp``, and the split follows the DimMap like any other: every
  token-wise op runs on ``s / cp`` tokens per device.  One decode token per request cannot
  be split: in decode the non-attention ops run whole on every cp rank.
* **Cache positions.**  A node that keeps a positional cache (any growth law but
  ``state``) holds its positions split over ``cp`` — in decode too, where its output is
  marked split on the token axis so that the cache and the cache reads of its readers are
  ``1 / cp`` per device.  A recurrent state is whole on every cp rank.
* **Attention.**  A new context axis ``c`` (scores, indexer logits) is split like the
  keys' positions unless an axis of the output already carries ``cp`` (prefill: the
  queries do), so the pairs of a step are ``1 / cp`` per device in both phases (in prefill
  assuming a load-balanced split of the causal triangle, e.g. head-and-tail chunks).  A
  softmax over a split context axis is computed blockwise (online softmax), not gathered;
  the apply that contracts a split context axis leaves a pending log-sum-exp merge —
  Partial over ``cp`` — which its first consumer resolves.

Ulysses and ring context parallelism hold the same data per device (1 / cp of every
query, key, value, output and cache, by heads or by positions), so their per-device work
and memory traffic are the same rows; only their collectives differ.  Both sets are
inferred, each over its own group: ``cp_ulysses`` and ``cp_ring`` take the cp degree
when the deployment's ``cp_kind`` names them and 1 otherwise (a collective over one
device is free):

====================  =========================================  ====================================
where                 Ulysses (``cp_ulysses``)                   ring (``cp_ring``)
====================  =========================================  ====================================
prefill, scores       all-to-all of q and k (tokens → heads)     K blocks passed around the ring
prefill, apply        all-to-all of v; all-to-all of the output  V blocks passed around the ring
                      back (heads → tokens), port −1
prefill, other        —                                          keys passed around (indexer), ``cp``
decode, first reader  all-gather of the head-split output        all-reduce of the log-sum-exp
of the attention                                                 (max, sum) and of the rescaled
output                                                           partial outputs
====================  =========================================  ====================================

Every collective carries its **message**: the layout of the communicated tensor on one
device (its groups divide the global elements into one device's share).
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis
from archsql.evaluator.primitives.attention import cached_reads
from archsql.schema.expr import RUNTIME_SYMBOLS

CP = "cp"  # the sequence (tokens, cache positions) split over context-parallel ranks
ULYSSES = "cp_ulysses"  # collectives of Ulysses context parallelism
RING = "cp_ring"  # collectives of ring context parallelism
S_SYM, C_SYM = RUNTIME_SYMBOLS["s"], RUNTIME_SYMBOLS["c"]


def token_axis(shape: list[Axis]) -> int | None:
    """The axis of new tokens (size ``s``) of a shape, if it has one."""
    return next((i for i, a in enumerate(shape) if a.value == S_SYM), None)


def is_context(axis: Axis) -> bool:
    """An axis of attended positions (size ``c``)."""
    return axis.value == C_SYM


def split_inputs(phase: str, refs, shapes, ins: list, layout_cls) -> list:
    """Model inputs: in prefill their token axis is split over cp (requests are over dp)."""
    if phase != "prefill":
        return ins
    out = list(ins)
    for port, ref in enumerate(refs):
        axis = token_axis(shapes[port])
        if ref.kind == "input" and axis is not None and out[port].group_of(axis) is None:
            out[port] = layout_cls(tuple(sorted((*out[port].sharded, (axis, CP)))), out[port].partial)
    return out


def keeps_split(prim, shape: list[Axis], axis: int, group: str | None) -> bool:
    """An op reducing a context axis split by cp blockwise (``Primitive.blockwise_context``:
    online softmax, merged by log-sum-exp) need not have the axis gathered."""
    return group == CP and prim.blockwise_context and is_context(shape[axis])


def context_group(res, ins: list, sharded: list[tuple[int, str]], out_axis: int) -> str | None:
    """The group of a new context axis: cp when the keys' positions (an input's token axis)
    are split by cp and no output axis carries cp yet."""
    if not is_context(res.shape[out_axis]) or any(g == CP for _, g in sharded):
        return None
    for port, shape in enumerate(res.ins):
        axis = token_axis(shape)
        if port > 0 and axis is not None and ins[port].group_of(axis) == CP:
            return CP
    return None


def contracted_context(res, ins: list, sharded: list[tuple[int, str]]) -> bool:
    """An input context axis split by cp that the output does not carry: the op summed over
    a device's share of the positions (a pending log-sum-exp merge)."""
    if any(g == CP for _, g in sharded):
        return False
    return any(
        lay.group_of(a) == CP and is_context(shape[a])
        for lay, shape in zip(ins, res.ins, strict=False)
        for a in range(len(shape))
    )


def cached_split(res, phase: str, sharded: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A node keeping a positional cache holds its positions split over cp (in decode its
    one new token is stored on one rank)."""
    if phase != "decode" or not any(f.growth != "state" for f in res.caches) or any(g == CP for _, g in sharded):
        return sharded
    axis = token_axis(res.shape)
    return sharded if axis is None else sorted((*sharded, (axis, CP)))


def _passed(ctx, res, port: int, numel) -> sympy.Expr:
    """The keys (or values) a ring passes around: every attended position's (a cache's, window
    capped), or this step's own when the attention keeps no cache (an encoder)."""
    reads = sympy.sympify(cached_reads(ctx, port))
    return reads if reads != 0 else numel(res.ins[port])


def kernel_collectives(prim, ctx, res, ins: list, collective_cls, numel) -> list:
    """Prefill collectives of an attention kernel whose queries are split by cp: Ulysses
    trades tokens for heads (all-to-all in, all-to-all out), ring passes the K/V blocks."""
    q_axis = token_axis(res.ins[0]) if res.ins else None
    if q_axis is None or ins[0].group_of(q_axis) != CP or len(res.ins) < 2:
        return []
    out = []
    if prim.attention_stage == "score":
        out.append(collective_cls("all_to_all", ULYSSES, 0, numel(res.ins[0]), ins[0], tag=f"@{ULYSSES}"))
        out.append(collective_cls("all_to_all", ULYSSES, 1, numel(res.ins[1]), ins[1], tag=f"@{ULYSSES}"))
        out.append(collective_cls("ring_pass", RING, 1, _passed(ctx, res, 1, numel), ins[1], tag=f"@{RING}"))
    elif prim.attention_stage == "apply":
        if not ctx.flag("values_in_keys"):
            out.append(collective_cls("all_to_all", ULYSSES, 1, numel(res.ins[1]), ins[1], tag=f"@{ULYSSES}"))
            out.append(collective_cls("ring_pass", RING, 1, _passed(ctx, res, 1, numel), ins[1], tag=f"@{RING}"))
    elif any(is_context(a) for a in res.shape):
        reads = sympy.sympify(prim.cache_reads(ctx))
        if reads != 0:  # another kernel over every position (an indexer): its keys circulate
            out.append(collective_cls("ring_pass", CP, 1, reads, ins[1], tag=f"@{CP}"))
    return out


def output_collectives(prim, res, ins: list, out_sharded: list[tuple[int, str]], collective_cls, numel) -> list:
    """Ulysses returns an attention output computed on a device's heads to its tokens."""
    if prim.attention_stage != "apply" or not res.ins:
        return []
    q_axis = token_axis(res.shape)
    if q_axis is None or dict(out_sharded).get(q_axis) != CP:
        return []
    message = layout_of_sharded(ins[0].__class__, out_sharded)
    return [collective_cls("all_to_all", ULYSSES, -1, numel(res.shape), message, tag=f"@{ULYSSES}")]


def merge_collectives(port: int, shape: list[Axis], lay, collective_cls, numel) -> list:
    """Decode: the first reader of an attention output split over cache positions merges
    it.  Ring: an all-reduce of the log-sum-exp per (request, token, head) and of the
    rescaled partial outputs; Ulysses (heads split over cp): an all-gather of the heads."""
    whole = numel(shape)
    rows = whole / shape[-1].expr  # one log-sum-exp per (request, token, head)
    return [
        collective_cls("all_reduce", RING, port, rows, lay, tag=f"@{RING}:lse"),
        collective_cls("all_reduce", RING, port, whole, lay, tag=f"@{RING}"),
        collective_cls("all_gather", ULYSSES, port, whole, lay.__class__((*lay.sharded, (-1, CP))), tag=f"@{ULYSSES}"),
    ]


def layout_of_sharded(layout_cls, sharded):
    return layout_cls(tuple(sorted(sharded)))
