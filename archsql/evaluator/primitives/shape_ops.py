"""Pure layout ops (no FLOPs): split an axis into heads, merge heads, permute axes."""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis, Flatten, InputDim, NewDim, Part, Split, keep
from archsql.evaluator.primitives.base import Ctx, NodeShapeError, Param, Primitive, fmt_shape


class _View(Primitive):
    """A reshape or selection that only re-labels memory: no FLOPs and no traffic of its own
    (a transpose or concat a kernel must materialize is charged to its consumer)."""

    abstract = True

    def io(self, ctx: Ctx):
        return sympy.Integer(0), sympy.Integer(0)


class ViewSplit(_View):
    """[..., a·b] → [..., a, b]: the last axis split into ``parts`` (outermost first)."""

    partial_passes = True  # a pending sum passes through a reshape

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


class MergeHeads(_View):
    """[..., heads, d] → [..., heads·d]."""

    partial_passes = True  # a pending sum passes through a reshape

    shape_kind = "explicit"

    def check(self, ctx: Ctx) -> None:
        if len(ctx.ins[0]) < 2:
            raise NodeShapeError("merge_heads needs [..., heads, d]", expected="rank >= 2", got=fmt_shape(ctx.ins[0]))

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 2), Flatten(0, (rank - 2, rank - 1)))


class Transpose(_View):
    """Permute axes: output axis i is input axis ``perm[i]``."""

    partial_passes = True  # a pending sum passes through a reshape

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


class Slice(_View):
    """One part of the last axis split into ``parts``: [..., Σparts] → [..., parts[index]]
    (torch.split(...)[index]).  No FLOPs."""

    partial_passes = True  # a pending sum passes through a reshape

    shape_kind = "axis_select"
    params = {
        "parts": Param("dims", doc="sizes of the parts, in order"),
        "index": Param("ints", doc="[i]: the part kept"),
    }

    def check(self, ctx: Ctx) -> None:
        parts, index = ctx.dims["parts"], ctx.dims["index"]
        total = sympy.Add(*(p.value for p in parts))
        last = ctx.ins[0][-1]
        if sympy.simplify(total - last.value) != 0:
            raise NodeShapeError(
                "slice parts must add up to the sliced axis",
                expected=f"{last.label} = {last.value}",
                got=" + ".join(f"{p.label}={p.value}" for p in parts) + f" = {total}",
            )
        if len(index) != 1 or not 0 <= index[0] < len(parts):
            raise NodeShapeError("slice index must be [i] with 0 <= i < len(parts)", got=str(index))

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 1), Part(0, rank - 1, tuple(ctx.dims["parts"]), ctx.dims["index"][0]))


class Concat(_View):
    """Concatenate along the last axis; leading axes must match, where an axis of size 1
    broadcasts (torch.cat after expand, e.g. a rope key shared by all heads).  No FLOPs."""

    partial_passes = True  # a pending sum passes through a reshape

    arity = (2, 8)
    shape_kind = "axis_concat"

    def check(self, ctx: Ctx) -> None:
        ranks = {len(s) for s in ctx.ins}
        if len(ranks) != 1:
            raise NodeShapeError("concat inputs must have the same rank", got=", ".join(fmt_shape(s) for s in ctx.ins))
        for axis in range(len(ctx.ins[0]) - 1):
            sizes = {a[axis].value for a in ctx.ins} - {sympy.Integer(1)}
            if len(sizes) > 1:
                raise NodeShapeError(
                    f"concat inputs differ on axis {axis} (only size-1 axes broadcast)",
                    got=", ".join(fmt_shape(s) for s in ctx.ins),
                )

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        lead = []
        for axis in range(rank - 1):
            port = next((p for p, s in enumerate(ctx.ins) if s[axis].value != 1), 0)
            lead.append(InputDim(port, axis))
        last = [s[-1] for s in ctx.ins]
        total = Axis(
            " + ".join(a.label for a in last), sympy.Add(*(a.expr for a in last)), sympy.Add(*(a.value for a in last))
        )
        return (*lead, NewDim(total))


class FirstToken(Primitive):
    """The first position of each request: [B, s, ...] → [B, ...] (hidden_states[:, 0], the
    [CLS] token an encoder's pooler reads).  No FLOPs.  Source: transformers BertPooler.forward."""

    partial_passes = True  # a selection passes a pending sum through

    shape_kind = "axis_select"

    def check(self, ctx: Ctx) -> None:
        if len(ctx.ins[0]) < 3:
            raise NodeShapeError("first_token needs [B, s, ...]", expected="rank >= 3", got=fmt_shape(ctx.ins[0]))

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), *(InputDim(0, i) for i in range(2, len(ctx.ins[0]))))
