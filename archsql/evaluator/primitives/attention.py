"""Attention primitives: rope, attention_score, softmax, attention_apply.

Queries are [B, s, heads, d]; keys/values written this step are [B, s, kv_heads, d] and
the score runs against all ``c`` attended positions (cached + new), so scores are
[B, heads, s, c].  With a causal mask, query i of the s new tokens (after p = c − s cached
ones) sees p + i + 1 keys, so the exact number of (query, key) pairs is
``s·c − s·(s−1)/2`` — ``s·(s+1)/2`` for a fresh prefill (c = s), ``c`` for one decode token.
"""

from __future__ import annotations

from typing import ClassVar

import sympy

from archsql.evaluator.dimmap import Axis, InputDim, NewDim, keep
from archsql.evaluator.factors import chunk_len, chunk_pairs, window_pairs
from archsql.evaluator.primitives.base import (
    Ctx,
    NodeShapeError,
    Param,
    Primitive,
    WeightDecl,
    expect_axis,
    expect_rank,
    fmt_shape,
    numel,
)
from archsql.schema.expr import RUNTIME_SYMBOLS

B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))
CONTEXT_AXIS_NAME = "c"


def attended_pairs(causal: bool, window: Axis | None = None, chunk: Axis | None = None) -> sympy.Expr:
    """(query, key) pairs per request per head; a causal sliding window of w > 0 keys caps
    each query's keys at w (``window_pairs``); w = 0 means no window.  Chunked attention of
    C > 0 positions per chunk lets each query see only its own chunk up to itself
    (``chunk_pairs``, see factors.py)."""
    if chunk is not None and chunk.value != 0:
        return chunk_pairs(S, C, chunk.expr)
    if window is not None and window.value != 0:
        return window_pairs(S, C, window.expr)
    return S * C - S * (S - 1) / 2 if causal else S * C


VALUES_IN_KEYS = Param(
    "flag",
    0,
    "1 when the values are part of the keys the score kernel already read (MLA absorbed: the "
    "latent is both), so the fused kernel reads them once",
)


def bidirectional(ctx: Ctx) -> bool:
    """A node with ``causal: 0``: an encoder's attention over this step's own tokens."""
    causal = ctx.dims.get("causal")
    return causal is not None and causal.value == 0


def cached_reads(ctx: Ctx, port: int) -> sympy.Expr:
    """Elements of the K (or V) cache a step reads: per request, every position the window
    keeps (B · kv_heads · d · min(c, window), or c without a window) — the new tokens'
    keys included, as the kernel reads them back from the cache.  Bidirectional attention
    (an encoder) keeps no cache: its keys and values are this step's activations (io)."""
    if bidirectional(ctx):
        return sympy.Integer(0)
    shape = ctx.ins[port]
    window = ctx.dims.get("window")
    chunk = ctx.dims.get("chunk")
    positions = C if window is None or window.value == 0 else sympy.Min(C, window.expr)
    if chunk is not None and chunk.value != 0:  # the keys of the latest token's chunk
        positions = chunk_len(C, chunk.expr)
    return shape[0].expr * shape[2].expr * shape[3].expr * positions


def _window(ctx: Ctx) -> Axis | None:
    window = ctx.dims.get("window")
    if window is not None and window.value != 0 and not ctx.flag("causal"):
        raise NodeShapeError("a sliding window needs a causal mask", expected="causal: 1 with window", got="causal: 0")
    return window


WINDOW = Param(default=0, doc="causal sliding window in keys per query (0 = no window)")
CHUNK = Param(default=0, doc="chunked local attention: positions per chunk, a query sees its own chunk (0 = none)")


def _chunk(ctx: Ctx) -> Axis | None:
    chunk = ctx.dims.get("chunk")
    if chunk is None or chunk.value == 0:
        return None
    if not ctx.flag("causal"):
        raise NodeShapeError("chunked attention needs a causal mask", expected="causal: 1 with chunk", got="causal: 0")
    window = ctx.dims.get("window")
    if window is not None and window.value != 0:
        raise NodeShapeError(
            "a node attends either a sliding window or its chunk, not both",
            expected="window: 0 or chunk: 0",
            got=f"window {window.value}, chunk {chunk.value}",
        )
    return chunk


def _pairs(ctx: Ctx) -> sympy.Expr:
    """The node's (query, key) pairs per request per head, from its causal/window/chunk params."""
    return attended_pairs(ctx.flag("causal"), _window(ctx), _chunk(ctx))


def context_axis():
    return Axis(CONTEXT_AXIS_NAME, C, C)


def _check_heads(ctx: Ctx) -> None:
    h, kv = ctx.dim("heads").value, ctx.dim("kv_heads").value
    if h.is_number and kv.is_number and (kv == 0 or h % kv != 0):
        raise NodeShapeError(
            "query heads must be a multiple of key/value heads",
            expected=f"heads % kv_heads == 0 (heads={h})",
            got=f"kv_heads={kv}",
        )


class Rope(Primitive):
    """Rotary embedding on the first ``d_rot`` features of each head: x·cos + rot(x)·sin,
    3 FLOPs per rotated element.  ``d_rot`` defaults to the whole head."""

    needs_whole_last_axis = True

    shape_kind = "preserve"
    params = {"d_rot": Param(default="@last", doc="rotated features per head (default: all)")}

    def check(self, ctx: Ctx) -> None:
        if len(ctx.ins[0]) < 2:
            raise NodeShapeError("rope needs [..., heads, d_head]", expected="rank >= 2", got=fmt_shape(ctx.ins[0]))

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        shape = ctx.ins[0]
        d_rot = shape[-1].expr if ctx.dims.get("d_rot") is None else ctx.e("d_rot")
        return 3 * numel(shape) / shape[-1].expr * d_rot


class AttentionScore(Primitive):
    """q·kᵀ per head: q [B, s, heads, d], k [B, s, kv_heads, d] → scores [B, heads, s, c].
    FLOPs 2·B·heads·d·pairs (GQA: each query head reads its group's key)."""

    math_class = "activation_gemm"

    kernel_kind = "attention"

    attention_stage = "score"
    arity = 2
    shape_kind = "explicit"
    params = {
        "heads": Param(doc="query heads"),
        "kv_heads": Param(doc="key/value heads"),
        "d_head": Param(doc="q/k head dim"),
        "causal": Param("flag", 1, "1 = causal mask (decoder), 0 = bidirectional"),
        "window": WINDOW,
        "chunk": CHUNK,
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "attention_score query [B, s, heads, d]")
        expect_rank(ctx, 1, 4, "attention_score key [B, s, kv_heads, d]")
        expect_axis(ctx, 0, 2, ctx.dim("heads"), "query heads")
        expect_axis(ctx, 1, 2, ctx.dim("kv_heads"), "key heads")
        expect_axis(ctx, 0, 3, ctx.dim("d_head"), "query head dim")
        expect_axis(ctx, 1, 3, ctx.dim("d_head"), "key head dim (must equal the query head dim)")
        _check_heads(ctx)

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 2), InputDim(0, 1), NewDim(context_axis()))

    def io(self, ctx: Ctx):
        """Flash-attention traffic: queries read; the scores stay on chip (softmax and apply
        continue in the same kernel).  The keys come from the cache (cache_reads), or, in
        bidirectional attention, are read as activations."""
        keys = numel(ctx.ins[1]) if bidirectional(ctx) else sympy.Integer(0)
        return (numel(ctx.ins[0]), keys), sympy.Integer(0)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        return cached_reads(ctx, port=1)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * ctx.ins[0][0].expr * ctx.e("heads") * ctx.e("d_head") * _pairs(ctx)

    def kv_cache_caps(self, params: dict[str, object]) -> dict[str, object]:
        """The score's sliding window or chunk: its K/V caches keep only those positions."""
        caps = {}
        for name in ("window", "chunk"):
            cap = params.get(name)
            if cap is not None and cap.value != 0:  # type: ignore[attr-defined]
                caps[name] = cap.value  # type: ignore[attr-defined]
        return caps


class _ScoreElementwise(Primitive):
    """An elementwise op that also runs on attention scores: ``flops_per_element`` FLOPs per
    element.  With ``causal: 1`` on scores [B, heads, s, c] only the unmasked pairs count and
    it runs inside the attention kernel (no traffic); elsewhere it reads and writes its
    tensor."""

    abstract = True
    flops_per_element: ClassVar[int]

    shape_kind = "preserve"
    params = {"causal": Param("flag", 0, "1 on causal attention scores"), "window": WINDOW, "chunk": CHUNK}

    def check(self, ctx: Ctx) -> None:
        if ctx.flag("causal"):
            expect_rank(ctx, 0, 4, f"causal {self.name} over scores [B, heads, s, c]")

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def io(self, ctx: Ctx):
        if ctx.flag("causal"):
            return sympy.Integer(0), sympy.Integer(0)
        return numel(ctx.ins[0]), numel(ctx.out)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        shape = ctx.ins[0]
        if ctx.flag("causal"):
            return self.flops_per_element * shape[0].expr * shape[1].expr * _pairs(ctx)
        return self.flops_per_element * numel(shape)


class Softmax(_ScoreElementwise):
    """Normalized exponentials over the last axis: 5 FLOPs per element (max, subtract,
    exp, sum, divide).  With ``causal: 1`` on scores [B, heads, s, c] only the unmasked
    pairs count, inside the attention kernel; elsewhere (router probabilities) it reads and
    writes its tensor.  Over a context axis split by cp it runs blockwise (online softmax)."""

    needs_whole_last_axis = True
    blockwise_context = True
    flops_per_element = 5


class AttentionApply(Primitive):
    """probs·v per head: probs [B, heads, s, c], v [B, s, kv_heads, d] → [B, s, heads, d].
    FLOPs 2·B·heads·d·pairs."""

    math_class = "activation_gemm"

    attention_stage = "apply"
    arity = 2
    shape_kind = "explicit"
    params = {
        "heads": Param(doc="query heads"),
        "kv_heads": Param(doc="key/value heads"),
        "d_head": Param(doc="value head dim"),
        "causal": Param("flag", 1),
        "window": WINDOW,
        "chunk": CHUNK,
        "values_in_keys": VALUES_IN_KEYS,
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "attention_apply probs [B, heads, s, c]")
        expect_rank(ctx, 1, 4, "attention_apply value [B, s, kv_heads, d]")
        expect_axis(ctx, 0, 1, ctx.dim("heads"), "probability heads")
        expect_axis(ctx, 1, 2, ctx.dim("kv_heads"), "value heads")
        expect_axis(ctx, 1, 3, ctx.dim("d_head"), "value head dim")
        _check_heads(ctx)

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 2), InputDim(0, 1), InputDim(1, 3))

    def io(self, ctx: Ctx):
        """Flash-attention traffic: the output written; the probabilities come from the score
        kernel on chip and the values from the cache (cache_reads), or, in bidirectional
        attention, are read as activations."""
        values = numel(ctx.ins[1]) if bidirectional(ctx) else sympy.Integer(0)
        return (sympy.Integer(0), values), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        return sympy.Integer(0) if ctx.flag("values_in_keys") else cached_reads(ctx, port=1)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * ctx.ins[0][0].expr * ctx.e("heads") * ctx.e("d_head") * _pairs(ctx)


class SinkSoftmax(Softmax):
    """Softmax with an attention sink: each row's normalizer also takes one learned logit
    per head, which is then dropped, so a head may put weight on "no key" (gpt-oss
    ``sinks``, FlashAttention's ``s_aux``).  Scores [B, heads, s, c] → probabilities of the
    same shape; 5 FLOPs per unmasked pair plus 5 per row for the sink column.  Its weight
    is the sinks, [heads], a parameter of the attention module itself — declare the node
    with ``path: ""`` so it is named ``self_attn.sinks``.
    Source: transformers gpt_oss ``eager_attention_forward`` (``combined_logits``)."""

    params = {
        "heads": Param(doc="query heads (one sink logit each)"),
        "causal": Param("flag", 1, "1 on causal attention scores"),
        "window": WINDOW,
        "chunk": CHUNK,
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "sink_softmax over scores [B, heads, s, c]")
        expect_axis(ctx, 0, 1, ctx.dim("heads"), "score heads")

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("sinks", (ctx.dim("heads"),))]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        shape = ctx.ins[0]
        return 5 * shape[0].expr * shape[1].expr * (_pairs(ctx) + shape[2].expr)


class Softcap(_ScoreElementwise):
    """Logit soft-capping, cap·tanh(x / cap) (the cap is a constant, not a dim): 3 FLOPs per
    element (divide, tanh, multiply).  With ``causal: 1`` on attention scores
    [B, heads, s, c] only the unmasked pairs count and it runs inside the attention kernel
    (Gemma-2 ``attn_logit_softcapping``); otherwise every element, read and written
    (Gemma-2 ``final_logit_softcapping`` on the sampled logits)."""

    flops_per_element = 3
