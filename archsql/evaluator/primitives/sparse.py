"""Sparse attention (DeepSeek sparse attention, DSA): a lightning indexer scores every
visible key, a top-k picks the keys each query attends, and attention runs over those only.

The indexer is causal and dense: query i of the s new tokens (after c − s cached ones)
scores all c − s + i + 1 visible positions, ``s·c − s·(s−1)/2`` pairs per request.  The
attention that follows sees at most ``topk`` of them per query, so its (query, key) pairs
are ``Σ_j min(j, topk)`` — the same sum as a causal window of ``topk`` keys, the named
factor ``window_pairs(s, c, topk)`` (``min(c, topk)`` in decode).  Unlike a window the
selection does not bound what is cached: every position stays selectable, so the caches
keep growing with c while the attention FLOPs stop at topk keys per query.

The DSA components run the attention in MLA's absorbed (MQA) form in both phases, as the
sparse kernels do (docs/pricing.md, "Sparse attention (DSA)").

Source: DeepSeek-V3.2-Exp ``inference/model.py`` (``Indexer.forward``, ``MLA.forward``);
transformers ``DeepseekV32Indexer`` / ``GlmMoeDsaIndexer``; FlashMLA
``flash_mla/flash_mla_interface.py`` (``flash_mla_sparse_fwd``).
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import InputDim, NewDim
from archsql.evaluator.factors import window_pairs
from archsql.evaluator.primitives.attention import (
    VALUES_IN_KEYS,
    AttentionApply,
    AttentionScore,
    Softmax,
    attended_pairs,
    context_axis,
)
from archsql.evaluator.primitives.base import Ctx, Param, Primitive, expect_axis, expect_rank, numel
from archsql.schema.expr import RUNTIME_SYMBOLS

S, C = RUNTIME_SYMBOLS["s"], RUNTIME_SYMBOLS["c"]
TOPK = Param(doc="keys each query attends, chosen by a top-k selector (DSA index_topk)")


def selected_pairs(ctx: Ctx) -> sympy.Expr:
    """(query, key) pairs per request per head when each query attends at most ``topk``
    of its causally visible keys: Σ_j min(j, topk) = window_pairs(s, c, topk)."""
    return window_pairs(S, C, ctx.e("topk"))


def gathered_reads(ctx: Ctx, port: int) -> sympy.Expr:
    """Cache elements a sparse kernel gathers: each query reads its own selected positions of
    the cache it attends, B · kv_heads · d · window_pairs(s, c, topk) — min(c, topk) per
    decode query.  Per KV head, not per query head: in the absorbed MLA form the DSA
    components run (FlashMLA ``flash_mla_sparse_fwd``: kv [s_kv, h_kv = 1, 576]) a query's
    selected latents (d = d_kv_lora + d_qk_rope, one KV head) are gathered once for all
    its heads.  No reuse across queries is assumed (each query selects its own keys)."""
    shape = ctx.ins[port]
    return shape[0].expr * shape[2].expr * shape[3].expr * selected_pairs(ctx)


class IndexerLogits(Primitive):
    """Lightning-indexer scores: for every query and every causally visible (cached or new)
    key, Σ_h w_h · relu(q_h · k).  q [B, s, heads, d], k [B, s, 1, d] (one key per token,
    the index-key cache), w [B, s, heads] → [B, s, c].  FLOPs per (query, key) pair:
    2·heads·d for the dot products + 3·heads (relu, weight, sum over heads)."""

    math_class = "activation_gemm"

    arity = 3
    shape_kind = "explicit"
    params = {"heads": Param(doc="indexer heads"), "d_head": Param(doc="indexer head dim")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "indexer_logits query [B, s, heads, d]")
        expect_rank(ctx, 1, 4, "indexer_logits key [B, s, 1, d]")
        expect_rank(ctx, 2, 3, "indexer_logits head weights [B, s, heads]")
        expect_axis(ctx, 0, 2, ctx.dim("heads"), "indexer query heads")
        expect_axis(ctx, 0, 3, ctx.dim("d_head"), "indexer query head dim")
        expect_axis(ctx, 1, 3, ctx.dim("d_head"), "indexer key head dim (must equal the query head dim)")
        expect_axis(ctx, 2, 2, ctx.dim("heads"), "indexer head weights")

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 1), NewDim(context_axis()))

    def io(self, ctx: Ctx):
        """Queries and head weights read, the logits [B, s, c] written; the keys come from
        the index-key cache (cache_reads)."""
        return (numel(ctx.ins[0]), sympy.Integer(0), numel(ctx.ins[2])), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        """Every cached index key of the context read once: B · d · c."""
        keys = ctx.ins[1]
        return keys[0].expr * keys[2].expr * keys[3].expr * C

    def flops(self, ctx: Ctx) -> sympy.Expr:
        per_pair = ctx.e("heads") * (2 * ctx.e("d_head") + 3)
        return ctx.ins[0][0].expr * per_pair * attended_pairs(True)


class TopkKeys(Primitive):
    """Pick the ``k`` best-scoring visible positions per query: scores [B, s, c] →
    indices [B, s, k] (fewer while c < k).  One compare per causally visible candidate."""

    needs_whole_last_axis = True

    shape_kind = "axis_replace"
    params = {"k": Param(doc="positions selected per query")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "topk_keys scores [B, s, c]")

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 1), NewDim(ctx.dim("k")))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return ctx.ins[0][0].expr * attended_pairs(True)


class SparseAttentionScore(AttentionScore):
    """q·kᵀ over the selected keys only: q [B, s, heads, d], k [B, s, kv_heads, d], the
    selected positions [B, s, topk] → scores [B, heads, s, c] of which each query uses at
    most topk.  FLOPs 2·B·heads·d·window_pairs(s, c, topk).  Always causal."""

    kernel_kind = None  # a sparse kernel: no measured op kind yet

    arity = 3
    params = {
        "heads": Param(doc="query heads"),
        "kv_heads": Param(doc="key/value heads"),
        "d_head": Param(doc="q/k head dim"),
        "topk": TOPK,
    }

    def check(self, ctx: Ctx) -> None:
        super().check(ctx)
        expect_rank(ctx, 2, 3, "sparse_attention_score selected positions [B, s, topk]")
        expect_axis(ctx, 2, 2, ctx.dim("topk"), "selected positions per query")

    def io(self, ctx: Ctx):
        """Queries and selected positions read; the scores stay on chip (one sparse attention
        kernel); the selected keys are gathered from the cache (cache_reads)."""
        return (numel(ctx.ins[0]), sympy.Integer(0), numel(ctx.ins[2])), sympy.Integer(0)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        return gathered_reads(ctx, port=1)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * ctx.ins[0][0].expr * ctx.e("heads") * ctx.e("d_head") * selected_pairs(ctx)


class SparseSoftmax(Softmax):
    """Softmax over each query's selected keys: scores [B, heads, s, c] (topk used per
    query) → same shape.  5 FLOPs per selected pair."""

    params = {"topk": TOPK}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "sparse_softmax over scores [B, heads, s, c]")

    def io(self, ctx: Ctx):
        """Inside the sparse attention kernel: no memory traffic."""
        return sympy.Integer(0), sympy.Integer(0)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        shape = ctx.ins[0]
        return 5 * shape[0].expr * shape[1].expr * selected_pairs(ctx)


class SparseAttentionApply(AttentionApply):
    """probs·v over the selected keys: probs [B, heads, s, c], v [B, s, kv_heads, d] →
    [B, s, heads, d].  FLOPs 2·B·heads·d·window_pairs(s, c, topk)."""

    params = {
        "heads": Param(doc="query heads"),
        "kv_heads": Param(doc="key/value heads"),
        "d_head": Param(doc="value head dim"),
        "topk": TOPK,
        "values_in_keys": VALUES_IN_KEYS,
    }

    def io(self, ctx: Ctx):
        """The output written; the selected values are gathered from the cache (cache_reads)."""
        return sympy.Integer(0), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        return sympy.Integer(0) if ctx.flag("values_in_keys") else gathered_reads(ctx, port=1)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * ctx.ins[0][0].expr * ctx.e("heads") * ctx.e("d_head") * selected_pairs(ctx)
