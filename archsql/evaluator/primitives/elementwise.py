"""Elementwise ops: activations, mul, add.  FLOPs = per-element cost × output elements."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import keep
from archsql.evaluator.primitives.base import Ctx, NodeShapeError, Primitive, _fmt, numel


class _Unary(Primitive):
    abstract = True
    shape_kind = "preserve"
    flops_per_element: int = 1

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return self.flops_per_element * numel(ctx.ins[0])


class Silu(_Unary):
    """x·sigmoid(x): 4 FLOPs per element (negate, exp, add, divide)."""

    flops_per_element = 4


class Sigmoid(_Unary):
    """1 / (1 + exp(−x)): 4 FLOPs per element (negate, exp, add, divide)."""

    flops_per_element = 4


class Gelu(_Unary):
    """tanh-approximate GELU: 8 FLOPs per element."""

    flops_per_element = 8


class _Binary(Primitive):
    abstract = True
    shape_kind = "broadcast"
    arity = 2

    def check(self, ctx: Ctx) -> None:
        a, b = ctx.ins
        same = len(a) == len(b) and all(sympy.simplify(x.value - y.value) == 0 for x, y in zip(a, b, strict=True))
        if not same:
            raise NodeShapeError(
                f"{self.name} needs two inputs of the same shape",
                expected=_fmt(a),
                got=_fmt(b),
                hint="an input comes from the wrong node, or a dim is bound differently on the two paths",
            )

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0])


class Mul(_Binary):
    """Elementwise product: 1 FLOP per element."""


class Add(_Binary):
    """Elementwise sum (residuals): 1 FLOP per element."""
