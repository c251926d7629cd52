"""Learned scale parameters: a vector (or one scalar) multiplied into a tensor, and a
per-expert scale gathered at the routing indices.

Both hold a bare ``nn.Parameter`` (or a trained persistent buffer) on their module rather
than a sub-module's ``.weight``, so the node's ``path`` names the tensor itself
(``router.scale``, ``layer_scalar``): the weight has suffix "" like a stacked expert
parameter.  Source: transformers Gemma4TextRouter.forward (``self.scale``,
``self.per_expert_scale``), Gemma4TextDecoderLayer.forward (``self.layer_scalar``).
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import keep
from archsql.evaluator.primitives.base import (
    Ctx,
    NodeShapeError,
    Param,
    Primitive,
    WeightDecl,
    expect_rank,
    fmt_shape,
    numel,
)


class ChannelScale(Primitive):
    """x · w with a learned w over the last axis ([d]), or one learned scalar ([1], ``d: 1``)
    broadcast over the whole tensor: 1 FLOP per element.  The node's path names the
    parameter (``router.scale``, a layer's ``layer_scalar``)."""

    partial_passes = True  # linear in its input

    shape_kind = "preserve"
    params = {"d": Param(doc="length of the learned vector: the last axis, or 1 for one scalar")}

    def check(self, ctx: Ctx) -> None:
        d, last = ctx.dim("d"), ctx.ins[0][-1]
        if d.value != 1 and sympy.simplify(last.value - d.value) != 0:
            raise NodeShapeError(
                "channel_scale multiplies the last axis by a learned vector of its size (or by one scalar)",
                expected=f"d = {last.label} = {last.value}, or d: 1",
                got=f"d = {d.label} = {d.value} on {fmt_shape(ctx.ins[0])}",
            )

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("weight", (ctx.dim("d"),), suffix="")]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0])


class ExpertScale(Primitive):
    """Routing weights [B, s, k] times a learned per-expert scale gathered at the k chosen
    experts (``top_k_weights * per_expert_scale[top_k_index]``): weight [experts], 1 FLOP per
    routing weight.  The node's path names the parameter (``router.per_expert_scale``)."""

    shape_kind = "preserve"
    params = {"experts": Param(doc="routed experts (one learned scale each)")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "expert_scale routing weights [B, s, k]")

    def dimmap(self, ctx: Ctx):
        return keep(0, 3)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("weight", (ctx.dim("experts"),), suffix="")]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0])
