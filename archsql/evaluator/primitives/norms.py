"""Normalizations: shape-preserving over the last axis, one weight vector (and bias)."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import keep
from archsql.evaluator.primitives.base import Ctx, Param, Primitive, WeightDecl, expect_axis, numel


class _Norm(Primitive):
    abstract = True
    shape_kind = "preserve"
    needs_whole_last_axis = True  # normalizes over the last axis
    default_role = "norm"
    flops_per_element: int = 0

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -1, ctx.dim("d"), f"{self.name} normalized axis")

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return self.flops_per_element * numel(ctx.ins[0])


class Rmsnorm(_Norm):
    """x / rms(x) · w.  4 FLOPs per element: square, sum, scale by 1/rms, multiply by w."""

    kernel_kind = "rmsnorm"

    name = "rmsnorm"
    params = {"d": Param(doc="normalized width")}
    flops_per_element = 4

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("weight", (ctx.dim("d"),))]


class Layernorm(_Norm):
    """(x - mean) / std · w + b.  7 FLOPs per element: mean, center, square, sum, scale, w, b."""

    name = "layernorm"
    params = {"d": Param(doc="normalized width"), "bias": Param("flag", 1)}
    flops_per_element = 7

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        out = [WeightDecl("weight", (ctx.dim("d"),))]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("d"),)))
        return out


class L2norm(_Norm):
    """x / rms(x) with no learned weight (Llama-4's qk norm).  3 FLOPs per element: square,
    sum, scale by 1/rms.  Source: transformers Llama4TextL2Norm.forward."""

    name = "l2norm"
    params = {"d": Param(doc="normalized width")}
    flops_per_element = 3
