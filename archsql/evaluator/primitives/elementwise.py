"""Elementwise ops: activations, mul, add.  FLOPs = per-element cost × output elements."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis, InputDim, Split, keep
from archsql.evaluator.primitives.base import Ctx, NodeShapeError, Param, Primitive, fmt_shape, numel


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


class Relu2(_Unary):
    """Squared ReLU, relu(x)²: 2 FLOPs per element (max, square).  Nemotron-H ``relu2``."""

    flops_per_element = 2


class _Binary(Primitive):
    abstract = True
    shape_kind = "broadcast"
    arity = 2

    def check(self, ctx: Ctx) -> None:
        """Same shapes; the second input may broadcast along axes of size 1 (a per-token
        scalar gate [B, s, 1] scaling [B, s, d])."""
        a, b = ctx.ins
        same = len(a) == len(b) and all(
            sympy.simplify(x.value - y.value) == 0 or y.value == 1 for x, y in zip(a, b, strict=True)
        )
        if not same:
            raise NodeShapeError(
                f"{self.name} needs two inputs of the same shape (the second may have size-1 axes)",
                expected=fmt_shape(a),
                got=fmt_shape(b),
                hint="an input comes from the wrong node, or a dim is bound differently on the two paths",
            )

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0])


class Mul(_Binary):
    """Elementwise product: 1 FLOP per element."""


class Add(_Binary):
    """Elementwise sum (residuals): 1 FLOP per element.  A sum of inputs carrying the same
    pending sums is itself that pending sum (a residual of two partial branches)."""

    def passes_partial(self, partials) -> bool:
        return len(set(partials)) == 1 and bool(partials[0])


class Scale(_Unary):
    """Multiply by a scalar — a constant or a per-position factor computed from the position
    alone (Llama-4's attention temperature on NoPE layers): 1 FLOP per element."""

    partial_passes = True  # linear in its input


class ClampedSwiglu(Primitive):
    """gpt-oss's gated activation on a fused gate/up projection: [..., 2·d] → [..., d].
    gate, up = x[..., ::2], x[..., 1::2] (interleaved); gate clamped above, up clamped both
    ways; out = (up + 1) · gate · sigmoid(α · gate).  11 FLOPs per output element: clamps
    (1 + 2), α·gate (1), sigmoid (4), gate·sigmoid (1), up + 1 (1), product (1).
    Source: transformers GptOssExperts._apply_gate."""

    shape_kind = "axis_replace"
    params = {"d": Param(doc="output features (half the fused input)")}

    def check(self, ctx: Ctx) -> None:
        last = ctx.ins[0][-1]
        if sympy.simplify(last.value - 2 * ctx.dim("d").value) != 0:
            raise NodeShapeError(
                "clamped_swiglu takes the fused gate/up features, twice its output",
                expected=f"last axis = 2 * {ctx.dim('d').label} = {2 * ctx.dim('d').value}",
                got=f"{last.label} = {last.value}",
            )

    def dimmap(self, ctx: Ctx):
        """The fused axis read as [d, 2] (interleaved gate/up pairs): the output is its outer
        part, so a split of the fused axis into whole pairs carries to the output."""
        rank = len(ctx.ins[0])
        pair = Axis("2", sympy.Integer(2), sympy.Integer(2))
        return (*keep(0, rank, rank - 1), Split(0, rank - 1, (ctx.dim("d"), pair), 0))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 11 * numel(ctx.out)


class Tanh(_Unary):
    """Hyperbolic tangent, (e^2x − 1) / (e^2x + 1): 5 FLOPs per element (scale, exp, subtract,
    add, divide).  BERT's pooler activation (transformers BertPooler.forward)."""

    flops_per_element = 5


class ReduceSum(Primitive):
    """Sum over one axis, which disappears: [..., n, ...] → [..., ...] (a weighted sum over
    an archive's history axis after a broadcast ``mul``: depth-wise residual mixing over
    a ``read: all`` stream).  n − 1 adds per output element."""

    partial_passes = True  # a sum of pending sums is a pending sum

    shape_kind = "explicit"
    params = {"axis": Param("ints", doc="the axis summed over, as a one-element list (negative counts from the end)")}

    def _axis(self, ctx: Ctx) -> int:
        (axis,) = ctx.dims["axis"] or [None]
        rank = len(ctx.ins[0])
        if axis is None or not -rank <= axis < rank or ctx.ins[0][axis].runtime:
            raise NodeShapeError(
                "reduce_sum sums one model-dim axis of its input",
                expected=f"axis: [i] naming a model-dim axis of {fmt_shape(ctx.ins[0])}",
                got=str(ctx.dims["axis"]),
            )
        return axis % rank

    def dimmap(self, ctx: Ctx):
        axis = self._axis(ctx)
        return tuple(InputDim(0, i) for i in range(len(ctx.ins[0])) if i != axis)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[0]) - numel(ctx.out)


class SituMul(_Binary):
    """Kimi-K3's gated activation SiTU-GLU on a gate and an up projection of the same shape:
    out = β·tanh(gate/β)·σ(gate)·up, the up input first soft-clamped to β_lin·tanh(up/β_lin)
    when the model sets a linear β (``linear_beta: 1``).  Per element: tanh(gate/β)·β 7
    (divide, tanh 5, multiply), σ(gate) 4, two products 2 → 13; the soft clamp adds 7.
    Source: transformers KimiK3 ``situ_and_mul`` (activation_situ_beta,
    activation_situ_linear_beta)."""

    params = {"linear_beta": Param("flag", 0, "1 when up is soft-clamped first (activation_situ_linear_beta set)")}

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return (13 + 7 * int(ctx.flag("linear_beta"))) * numel(ctx.ins[0])
