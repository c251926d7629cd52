"""Vision-tower ops: image patches in, image tokens out, and their place among text tokens.

A request's image arrives as ``v`` patches (the runtime symbol v: image patches per
request this step, 0 for text-only workloads).  A model input ``pixel_values`` is [B, v]:
each element one patch, whose pixels (channels × temporal patch × patch × patch values)
the patch embedding reads.  A vision encoder attends its own patches (bidirectional, no
cache); a spatial merge folds k neighbouring patches into one token ([B, v / k, k·d]); the
language model writes those image tokens into chosen positions of its [B, s, d] sequence.

Sources: transformers Qwen3VLVisionPatchEmbed / Qwen3VLVisionModel.fast_pos_embed_interpolate
/ Qwen3VLVisionAttention / Qwen3VLVisionPatchMerger, Qwen3VLModel.get_placeholder_mask +
masked_scatter, Qwen3VLTextModel._deepstack_process.
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis, InputDim, NewDim, keep
from archsql.evaluator.primitives.base import (
    Contraction,
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


class PatchEmbed(Primitive):
    """Patches [B, v] → [B, v, out]: a convolution whose kernel equals its stride (each
    patch's pixels projected once), stored as PyTorch keeps it: a Conv3d over ``temporal``
    frames, weight [out, channels, temporal, patch, patch], or with ``temporal: 0`` a Conv2d,
    weight [out, channels, patch, patch] (+ bias [out]).  FLOPs 2·B·v·out·pixels (+ B·v·out
    with the bias), pixels = channels · max(temporal, 1) · patch²."""

    math_class = "weight_gemm"

    shape_kind = "source"
    params = {
        "out": Param(doc="embedding width"),
        "channels": Param(doc="image channels (in_channels)"),
        "temporal": Param(default=0, doc="frames per patch of a Conv3d (temporal_patch_size); 0: a Conv2d"),
        "patch": Param(doc="patch side in pixels (patch_size)"),
        "bias": Param("flag", 0),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 2, "patch_embed takes image patches [B, v]")

    def dimmap(self, ctx: Ctx):
        return (*keep(0, 2), NewDim(ctx.dim("out")))

    def _pixels(self, ctx: Ctx) -> sympy.Expr:
        frames = ctx.e("temporal") if ctx.dim("temporal").value != 0 else 1
        return ctx.e("channels") * frames * ctx.e("patch") ** 2

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        frames = (ctx.dim("temporal"),) if ctx.dim("temporal").value != 0 else ()
        axes = (ctx.dim("out"), ctx.dim("channels"), *frames, ctx.dim("patch"), ctx.dim("patch"))
        out = [WeightDecl("weight", axes)]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("out"),)))
        return out

    def contraction(self, ctx: Ctx) -> Contraction:
        return Contraction({2: 0})

    def io(self, ctx: Ctx):
        """Reads every pixel of every patch, writes the embeddings."""
        return numel(ctx.ins[0]) * self._pixels(ctx), numel(ctx.out)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        total = 2 * numel(ctx.out) * self._pixels(ctx)
        if ctx.flag("bias"):
            total += numel(ctx.out)
        return total


class InterpolatedPosEmbed(Primitive):
    """A learned grid of position embeddings resampled to each image's patch grid: every
    patch [B, v] gets the weighted sum of ``taps`` neighbouring grid entries → [B, v, d]
    (bilinear: 4 taps, bicubic: 16), 2·taps − 1 FLOPs per output element (taps multiplies,
    taps − 1 adds).  The table is stored as ``table`` gives it: [positions, d] (an
    nn.Embedding over a √positions × √positions grid) or [height, width, d].  Sources:
    transformers Qwen3VLVisionModel.fast_pos_embed_interpolate (pos_embed); SGLang
    Learnable2DInterpPosEmbDividedFixed (Kimi-K3 patch_embed.pos_emb, bicubic)."""

    shape_kind = "source"
    params = {
        "d": Param(doc="width"),
        "table": Param("dims", doc="the stored table's shape, width last"),
        "taps": Param(default=4, doc="grid entries mixed per patch (bilinear 4, bicubic 16)"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 2, "interpolated_pos_embed takes image patches [B, v]")
        table = ctx.dims["table"]
        if not table or sympy.simplify(table[-1].value - ctx.dim("d").value) != 0:
            raise NodeShapeError(
                "interpolated_pos_embed: the table's last axis is the embedding width",
                expected=f"table: [..., {ctx.dim('d').label}]",
                got="[" + ", ".join(a.label for a in table) + "]",
            )

    def dimmap(self, ctx: Ctx):
        return (*keep(0, 2), NewDim(ctx.dim("d")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("weight", tuple(ctx.dims["table"]), streamed=False)]

    def io(self, ctx: Ctx):
        """Reads the taps of every patch, writes one embedding per patch."""
        return ctx.e("taps") * numel(ctx.out), numel(ctx.out)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return (2 * ctx.e("taps") - 1) * numel(ctx.out)


class MergeTokens(Primitive):
    """Spatial merge: every ``tokens`` consecutive patches (a merge × merge square, kept
    adjacent by the patch order) folded into one token, [B, n, d] → [B, n / tokens,
    tokens·d] (``x.view(-1, tokens · d)``).  A reshape: no FLOPs."""

    shape_kind = "explicit"
    params = {"tokens": Param(doc="patches folded into one token (spatial_merge_size²)")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "merge_tokens takes [B, n, d]")

    def dimmap(self, ctx: Ctx):
        n, d, k = ctx.ins[0][1], ctx.ins[0][2], ctx.dim("tokens")
        merged = Axis(f"{n.label} / {k.label}", n.expr / k.expr, n.value / k.value)
        width = Axis(f"{k.label} * {d.label}", k.expr * d.expr, k.value * d.value)
        return (InputDim(0, 0), NewDim(merged), NewDim(width))

    def io(self, ctx: Ctx):
        return sympy.Integer(0), sympy.Integer(0)


class ScatterRows(Primitive):
    """Rows [B, n, d] written into n positions of a sequence [B, s, d] → [B, s, d] (image
    tokens placed at the image-placeholder positions, ``masked_scatter``), or added to the
    rows there (``add: 1``: DeepStack's ``hidden_states[visual_pos_masks] += visual_embeds``,
    B·n·d FLOPs).  The sequence keeps its shape."""

    arity = 2
    shape_kind = "explicit"
    params = {"add": Param("flag", 0, "1: add the rows to the positions' values; 0: overwrite them")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "scatter_rows sequence [B, s, d]")
        expect_rank(ctx, 1, 3, "scatter_rows rows [B, n, d]")
        seq, rows = ctx.ins
        if sympy.simplify(seq[2].value - rows[2].value) != 0 or sympy.simplify(seq[0].value - rows[0].value) != 0:
            raise NodeShapeError(
                "scatter_rows writes rows of the sequence's width into it",
                expected=f"rows [{seq[0].label}, n, {seq[2].label}]",
                got=fmt_shape(rows),
            )

    def dimmap(self, ctx: Ctx):
        return keep(0, 3)

    def io(self, ctx: Ctx):
        """Reads the rows (and, adding, the positions they land on), writes those positions."""
        rows = numel(ctx.ins[1])
        return (rows if ctx.flag("add") else sympy.Integer(0), rows), rows

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.ins[1]) if ctx.flag("add") else sympy.Integer(0)


class BidirectionalAttention(Primitive):
    """Self-attention of an encoder over its own tokens, every query seeing every key of
    the request (no mask, no cache): q, k, v [B, n, heads, d] → [B, n, heads, d].  One node
    for the score, softmax and apply of one kernel: per request and head 2·d·n² (q·kᵀ),
    5·n² (softmax), 2·d·n² (probs·v) → B·heads·(4·d + 5)·n².  n is the input's token axis
    (a vision tower's patches: v² pairs per image)."""

    math_class = "activation_gemm"

    arity = 3
    shape_kind = "explicit"
    needs_whole_last_axis = True
    params = {"heads": Param(doc="heads"), "d_head": Param(doc="head dim")}

    def check(self, ctx: Ctx) -> None:
        for port, what in enumerate(("q", "k", "v")):
            expect_rank(ctx, port, 4, f"bidirectional_attention {what} [B, n, heads, d]")
            expect_axis(ctx, port, 2, ctx.dim("heads"), f"bidirectional_attention {what} heads")
            expect_axis(ctx, port, 3, ctx.dim("d_head"), f"bidirectional_attention {what} head dim")
            expect_axis(ctx, port, 1, ctx.ins[0][1], f"bidirectional_attention {what} tokens")

    def dimmap(self, ctx: Ctx):
        return keep(0, 4)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        b, n = ctx.ins[0][0].expr, ctx.ins[0][1].expr
        return b * ctx.e("heads") * (4 * ctx.e("d_head") + 5) * n**2
