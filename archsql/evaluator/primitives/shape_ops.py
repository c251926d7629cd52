"""Pure layout ops (no FLOPs): split an axis into heads, merge heads, permute axes."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Flatten, InputDim, Split, keep
from archsql.evaluator.primitives.base import Ctx, NodeShapeError, Param, Primitive, _fmt


class ViewSplit(Primitive):
    """[..., a·b] → [..., a, b]: the last axis split into ``parts`` (outermost first)."""

    shape_kind = "explicit"
    params = {"parts": Param("dims", doc="sizes of the new axes, outermost first")}

    def check(self, ctx: Ctx) -> None:
        parts = ctx.dims["parts"]
        last = ctx.ins[0][-1]
        prod = sympy.Mul(*(p.value for p in parts))
        if sympy.simplify(prod - last.value) != 0:
            raise NodeShapeError(
                "view_split parts must multiply to the split axis",
                expected=f"{last.label} = {last.value}",
                got=" * ".join(f"{p.label}={p.value}" for p in parts) + f" = {prod}",
            )

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        parts = tuple(ctx.dims["parts"])
        return (*keep(0, rank, rank - 1), *(Split(0, rank - 1, parts, i) for i in range(len(parts))))


class MergeHeads(Primitive):
    """[..., heads, d] → [..., heads·d]."""

    shape_kind = "explicit"

    def check(self, ctx: Ctx) -> None:
        if len(ctx.ins[0]) < 2:
            raise NodeShapeError("merge_heads needs [..., heads, d]", expected="rank >= 2", got=_fmt(ctx.ins[0]))

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 2), Flatten(0, (rank - 2, rank - 1)))


class Transpose(Primitive):
    """Permute axes: output axis i is input axis ``perm[i]``."""

    shape_kind = "permute"
    params = {"perm": Param("ints", doc="input axis for each output axis")}

    def check(self, ctx: Ctx) -> None:
        perm = ctx.dims["perm"]
        if sorted(perm) != list(range(len(ctx.ins[0]))):
            raise NodeShapeError(
                "transpose perm must be a permutation of the input axes",
                expected=f"a permutation of 0..{len(ctx.ins[0]) - 1}",
                got=str(perm),
            )

    def dimmap(self, ctx: Ctx):
        return tuple(InputDim(0, i) for i in ctx.dims["perm"])
