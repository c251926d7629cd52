"""MoE routing: top-k selection, token dispatch to experts, weighted combine."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import InputDim, NewDim, keep
from archsql.evaluator.primitives.base import (
    Ctx,
    Param,
    Primitive,
    WeightDecl,
    expect_axis,
    expect_rank,
    leading,
    numel,
)


class Topk(Primitive):
    """Select the k largest of the last axis (expert logits → routing weights/indices).
    One compare per input element; renormalization of the k weights is included."""

    needs_whole_last_axis = True

    shape_kind = "axis_replace"
    params = {"k": Param(doc="selected entries")}

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 1), NewDim(ctx.dim("k")))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0]) + 2 * leading(ctx.ins[0]) * ctx.e("k")


class Dispatch(Primitive):
    """Send each token to its top-k experts: x [B, s, d], routing [B, s, k] → [B, s, k, d].
    Data movement only (an all-to-all under expert parallelism)."""

    expert_route = "send"
    arity = 2
    shape_kind = "explicit"
    params = {"top_k": Param(doc="experts per token")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "dispatch tokens [B, s, d]")
        expect_rank(ctx, 1, 3, "dispatch routing [B, s, k]")
        expect_axis(ctx, 1, 2, ctx.dim("top_k"), "dispatch routing")

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 1), NewDim(ctx.dim("top_k")), InputDim(0, 2))


class Combine(Primitive):
    """Weighted sum of the k expert outputs: y [B, s, k, d], routing [B, s, k] → [B, s, d].
    2 FLOPs per expert-output element (scale, accumulate).  Under expert parallelism the
    expert outputs first come back to their tokens' devices (an all-to-all)."""

    expert_route = "return"
    arity = 2

    shape_kind = "explicit"
    params = {"top_k": Param(doc="experts per token")}

    def passes_partial(self, partials) -> bool:
        """Linear in the expert outputs (the routing weights are whole): their pending sums
        (an expert's columns split over moe_tp) pass, to be reduced once with the others."""
        return bool(partials[0]) and not any(partials[1:])

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "combine expert outputs [B, s, k, d]")
        expect_axis(ctx, 0, 2, ctx.dim("top_k"), "combine expert axis")
        expect_axis(ctx, 1, 2, ctx.dim("top_k"), "combine routing")

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 1), InputDim(0, 3))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * numel(ctx.ins[0])


class SelectionBias(Primitive):
    """Aux-loss-free load balancing: a learned per-expert bias added to the expert scores
    used to *choose* experts (not to weight them): [..., experts] → [..., experts], weight
    ``e_score_correction_bias`` [experts].  For a bias held by the MoE block itself
    (MiniMax-M2) — the DeepSeek layout keeps it in the gate (``router`` with
    ``correction_bias: 1``).  1 FLOP per element."""

    shape_kind = "preserve"
    params = {"experts": Param(doc="routed experts (scores axis)")}

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -1, ctx.dim("experts"), "selection_bias expert scores")

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("e_score_correction_bias", (ctx.dim("experts"),))]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0])
