"""Recurrent mixers: linear attention and state-space models with a fixed-size state.

A recurrent mixer keeps, per request, a state that does not grow with the context: the
last ``kernel − 1`` inputs of its causal convolution and the matrix state of its scan.
The scan nodes compute the mixer's output [B, s, ...]; the state itself is the output of a
small node (``conv_state``, ``scan_state``) of shape [B, ...] with no token axis, which a
component declares as a cache with ``growth: state``.

FLOP formulas count the recurrent (token-by-token) form of each scan, per token, exactly as
the reference recurrence writes it; chunked kernels compute the same recurrence with extra
intra-chunk work, which these formulas do not add.  Weight preprocessing done once per step
and not per token (``A = −exp(A_log)``) is left out.

Sources: transformers ``MambaMixer.slow_forward`` (Mamba1 selective scan), ``Zamba2MambaMixer
.torch_forward`` / ``NemotronHMamba2Mixer`` (Mamba2 SSD), ``torch_recurrent_gated_delta_rule``
and ``Qwen3NextRMSNormGated`` (Qwen3-Next / Qwen3.5 gated DeltaNet), ``causal_conv1d_fn``.
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis, InputDim, NewDim, keep
from archsql.evaluator.primitives.base import (
    Ctx,
    NodeShapeError,
    Param,
    Primitive,
    WeightDecl,
    expect_axis,
    expect_multiple,
    expect_rank,
    fmt_shape,
    numel,
)

SOFTPLUS = 3  # log(1 + exp(x)): exp, add, log
SILU = 4  # x · sigmoid(x): negate, exp, add, divide
SIGMOID = 4


def _tokens(ctx: Ctx, port: int = 0) -> sympy.Expr:
    """B · s of a [B, s, ...] input."""
    shape = ctx.ins[port]
    return shape[0].expr * shape[1].expr


def _minus_one(axis: Axis) -> Axis:
    return Axis(f"{axis.label} - 1", axis.expr - 1, axis.value - 1)


class CausalConv1d(Primitive):
    """Depthwise causal convolution over time (``causal_conv1d_fn``): x [B, s, channels] →
    [B, s, channels]; weight [channels, 1, kernel] (+ bias [channels]) as checkpoints store
    ``nn.Conv1d(groups=channels)``.  Each output element is kernel products and kernel − 1
    sums (2·kernel − 1 FLOPs), + 1 with the bias, + 4 with the fused SiLU
    (``activation='silu'``).  A prefill starts from zero padding, a decode step from the conv
    state: either way every output reads ``kernel`` inputs."""

    shape_kind = "preserve"
    params = {
        "channels": Param(doc="convolved channels (groups = channels)"),
        "kernel": Param(doc="kernel width in tokens (conv_kernel)"),
        "bias": Param("flag", 0, "1 when the convolution has a bias"),
        "silu": Param("flag", 0, "1 when SiLU is applied to the output in the same call"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "causal_conv1d input [B, s, channels]")
        expect_axis(ctx, 0, 2, ctx.dim("channels"), "causal_conv1d channels")

    def dimmap(self, ctx: Ctx):
        return keep(0, 3)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        one = Axis("1", sympy.Integer(1), sympy.Integer(1))
        out = [WeightDecl("weight", (ctx.dim("channels"), one, ctx.dim("kernel")))]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("channels"),)))
        return out

    def flops(self, ctx: Ctx) -> sympy.Expr:
        per_element = 2 * ctx.e("kernel") - 1 + int(ctx.flag("bias")) + SILU * int(ctx.flag("silu"))
        return per_element * numel(ctx.ins[0])


class ConvState(Primitive):
    """The decode state of a causal convolution: the last ``kernel − 1`` inputs of every
    channel, x [B, s, channels] → [B, channels, kernel − 1] per request, whatever the
    context.  Data movement only; a step reads the old state (a cache read) and writes the
    new one."""

    shape_kind = "explicit"
    params = {"kernel": Param(doc="kernel width of the convolution whose inputs are kept")}

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "conv_state input [B, s, channels]")

    def dimmap(self, ctx: Ctx):
        return (InputDim(0, 0), InputDim(0, 2), NewDim(_minus_one(ctx.dim("kernel"))))

    def io(self, ctx: Ctx):
        return sympy.Integer(0), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.out)


class ScanState(Primitive):
    """The fixed-size matrix state a scan carries from step to step, [B, *parts] per
    request (Mamba1 [B, d_inner, d_state]; Mamba2 [B, heads, head_dim, d_state]; gated
    DeltaNet [B, v_heads, d_k, d_v]).  Reads the scan's output only to stay on its dataflow
    path (it keeps the batch axis); no FLOPs, a step reads the old state (a cache read) and
    writes the new."""

    shape_kind = "explicit"
    params = {"parts": Param("dims", doc="state axes after the batch axis")}

    def check(self, ctx: Ctx) -> None:
        if len(ctx.ins[0]) < 2:
            raise NodeShapeError(
                "scan_state reads a scan output [B, s, ...]", expected="rank >= 2", got=fmt_shape(ctx.ins[0])
            )

    def dimmap(self, ctx: Ctx):
        """A state axis named like an axis of the scan's output (its heads, its channels) is
        that axis — so a head split of the scan splits its state the same way; the others
        (the state size) are new."""
        free = {a.label: i for i, a in enumerate(ctx.ins[0]) if i >= 2}
        out = []
        for part in ctx.dims["parts"]:
            axis = free.pop(part.label, None)
            out.append(InputDim(0, axis) if axis is not None and ctx.ins[0][axis].value == part.value else NewDim(part))
        return (InputDim(0, 0), *out)

    def io(self, ctx: Ctx):
        return sympy.Integer(0), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        """The old state, read once per step (stored like the other caches)."""
        return numel(ctx.out)


class SelectiveScan(Primitive):
    """Mamba1 selective scan (``selective_scan_fn`` with ``delta_softplus``): x [B, s, D],
    dt [B, s, D] (dt_proj output, its bias included), B [B, s, N], C [B, s, N] and an
    optional gate z [B, s, D] → y [B, s, D].  Weights A_log [D, N] and D [D].

    Per token: dt = softplus(dt) 3 per channel; per (channel, state) exp(dt·A) 2, dt·B·x 2,
    h = dA·h + dBx 2, y += C·h 2 → 8·D·N; y + D·x 2 per channel; with the gate y·silu(z)
    5 per channel.  Total 8·D·N + 5·D (+ 5·D gated) per token."""

    arity = (4, 5)
    shape_kind = "explicit"
    params = {
        "d_inner": Param(doc="scanned channels (expand · d_model)"),
        "d_state": Param(doc="state size per channel (N)"),
    }

    def check(self, ctx: Ctx) -> None:
        for port, (axis, what) in enumerate(
            [("d_inner", "x"), ("d_inner", "dt"), ("d_state", "B"), ("d_state", "C"), ("d_inner", "gate z")][
                : len(ctx.ins)
            ]
        ):
            expect_rank(ctx, port, 3, f"selective_scan {what} [B, s, {axis}]")
            expect_axis(ctx, port, 2, ctx.dim(axis), f"selective_scan {what}")

    def dimmap(self, ctx: Ctx):
        return keep(0, 3)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [
            WeightDecl("A_log", (ctx.dim("d_inner"), ctx.dim("d_state"))),
            WeightDecl("D", (ctx.dim("d_inner"),)),
        ]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        d, n = ctx.e("d_inner"), ctx.e("d_state")
        gate = 5 if len(ctx.ins) == 5 else 0
        return _tokens(ctx) * (8 * d * n + (SOFTPLUS + 2 + gate) * d)


class SsdScan(Primitive):
    """Mamba2 state-space-duality scan (``mamba_chunk_scan_combined`` with ``dt_softplus``):
    x [B, s, H, P], dt [B, s, H], B [B, s, G, N], C [B, s, G, N] → y [B, s, H, P]; each
    head reads its group's B and C (H / G heads per group).  Weights A_log [H], D [H],
    dt_bias [H].

    Per token: per head dt = softplus(dt + dt_bias) 4, dA = exp(dt·A) 2 → 6·H; per (head,
    p) dt·x 1 and y + D·x 2 → 3·H·P; per (head, p, n) h = dA·h + (dt·x)·B 3 and y += C·h 2
    → 5·H·P·N.  Total 5·H·P·N + 3·H·P + 6·H per token."""

    math_class = "activation_gemm"

    arity = 4
    shape_kind = "explicit"
    params = {
        "heads": Param(doc="SSM heads (mamba_num_heads)"),
        "d_head": Param(doc="channels per head (mamba_head_dim)"),
        "groups": Param(doc="B/C groups (n_groups)"),
        "d_state": Param(doc="state size (ssm_state_size)"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "ssd_scan x [B, s, heads, d_head]")
        expect_axis(ctx, 0, 2, ctx.dim("heads"), "ssd_scan x heads")
        expect_axis(ctx, 0, 3, ctx.dim("d_head"), "ssd_scan x head dim")
        expect_rank(ctx, 1, 3, "ssd_scan dt [B, s, heads]")
        expect_axis(ctx, 1, 2, ctx.dim("heads"), "ssd_scan dt heads")
        for port, what in ((2, "B"), (3, "C")):
            expect_rank(ctx, port, 4, f"ssd_scan {what} [B, s, groups, d_state]")
            expect_axis(ctx, port, 2, ctx.dim("groups"), f"ssd_scan {what} groups")
            expect_axis(ctx, port, 3, ctx.dim("d_state"), f"ssd_scan {what} state size")
        expect_multiple(ctx, "heads", "groups", "SSM heads must be a multiple of the B/C groups")

    def dimmap(self, ctx: Ctx):
        return keep(0, 4)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        heads = (ctx.dim("heads"),)
        return [WeightDecl("A_log", heads), WeightDecl("D", heads), WeightDecl("dt_bias", heads)]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        h, p, n = ctx.e("heads"), ctx.e("d_head"), ctx.e("d_state")
        return _tokens(ctx) * (5 * h * p * n + 3 * h * p + 6 * h)


class GatedDeltaRule(Primitive):
    """Gated delta rule (Qwen3-Next / Qwen3.5 gated DeltaNet, ``use_qk_l2norm_in_kernel``):
    q, k [B, s, Hk, dk], v [B, s, Hv, dv], a [B, s, Hv] (decay input), b [B, s, Hv]
    (write-strength input) → o [B, s, Hv, dv]; each key head serves Hv / Hk value heads.
    Weights A_log [Hv] and dt_bias [Hv]: g = −exp(A_log)·softplus(a + dt_bias), β = σ(b).

    Per token and key head: l2-normalize q and k (2·(3·dk + 1): square-sum 2·dk, rsqrt 1,
    scale dk) and scale q by 1/√dk (dk) → 7·dk + 2.  Per value head: g 5 (add, softplus,
    multiply), β 4, exp(g) 1; state S [dk, dv]: S·exp(g) dk·dv, Sᵀk 2·dk·dv,
    δ = (v − Sᵀk)·β 2·dv, S += k δᵀ 2·dk·dv, o = Sᵀq 2·dk·dv → 7·dk·dv + 2·dv + 10.
    Total Hv·(7·dk·dv + 2·dv + 10) + Hk·(7·dk + 2) per token."""

    math_class = "activation_gemm"

    arity = 5
    shape_kind = "explicit"
    needs_whole_last_axis = True  # l2-normalizes q and k over their head dim
    whole_last_axis_ports = (0, 1)  # a and b [B, s, v_heads] end in the (splittable) heads
    params = {
        "k_heads": Param(doc="query/key heads (linear_num_key_heads)"),
        "v_heads": Param(doc="value heads (linear_num_value_heads)"),
        "d_k": Param(doc="query/key head dim"),
        "d_v": Param(doc="value head dim"),
    }

    def check(self, ctx: Ctx) -> None:
        for port, what, heads, dim in (
            (0, "q", "k_heads", "d_k"),
            (1, "k", "k_heads", "d_k"),
            (2, "v", "v_heads", "d_v"),
        ):
            expect_rank(ctx, port, 4, f"gated_delta_rule {what} [B, s, {heads}, {dim}]")
            expect_axis(ctx, port, 2, ctx.dim(heads), f"gated_delta_rule {what} heads")
            expect_axis(ctx, port, 3, ctx.dim(dim), f"gated_delta_rule {what} head dim")
        for port, what in ((3, "a"), (4, "b")):
            expect_rank(ctx, port, 3, f"gated_delta_rule {what} [B, s, v_heads]")
            expect_axis(ctx, port, 2, ctx.dim("v_heads"), f"gated_delta_rule {what}")
        expect_multiple(ctx, "v_heads", "k_heads", "value heads must be a multiple of key heads")

    def dimmap(self, ctx: Ctx):
        return keep(2, 4)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        heads = (ctx.dim("v_heads"),)
        return [WeightDecl("A_log", heads), WeightDecl("dt_bias", heads)]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        hk, hv, dk, dv = (ctx.e(n) for n in ("k_heads", "v_heads", "d_k", "d_v"))
        return _tokens(ctx) * (hv * (7 * dk * dv + 2 * dv + 10) + hk * (7 * dk + 2))


class RmsnormGated(Primitive):
    """Gated RMSNorm of a recurrent mixer's output: rmsnorm(x)·w·silu(z)
    (``norm_before_gate: 1``, Qwen3-Next ``RMSNormGated``) or rmsnorm(x·silu(z))·w
    (``norm_before_gate: 0``, Mamba2 ``RMSNormGated``).  x and z have the same shape; the
    last axis (width d, weight [d]) is normalized in ``groups`` equal groups.  9 FLOPs per
    element either way: square, sum, scale, weight (4) + silu (4) + gate multiply (1).
    Each group (a head's features, or d / groups channels) is normalized alone, so a split
    into whole heads/groups needs no gather."""

    arity = 2
    shape_kind = "preserve"
    params = {
        "d": Param(doc="normalized width (the weight's length)"),
        "groups": Param(default=1, doc="normalization groups along the last axis"),
        "norm_before_gate": Param("flag", 1, "1: norm(x)·silu(z); 0: norm(x·silu(z))"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -1, ctx.dim("d"), "rmsnorm_gated normalized axis")
        a, b = ctx.ins
        if len(a) != len(b) or any(sympy.simplify(x.value - y.value) != 0 for x, y in zip(a, b, strict=True)):
            raise NodeShapeError(
                "rmsnorm_gated needs x and the gate z of the same shape", expected=fmt_shape(a), got=fmt_shape(b)
            )
        expect_multiple(ctx, "d", "groups", "groups must divide the normalized width")

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return [WeightDecl("weight", (ctx.dim("d"),))]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 9 * numel(ctx.ins[0])


class RmsScale(Primitive):
    """x / rms(x) with no learned weight (FalconMamba ``rms_forward`` on dt, B and C):
    3 FLOPs per element (square, sum, scale)."""

    shape_kind = "preserve"
    needs_whole_last_axis = True
    params = {"d": Param(doc="normalized width")}

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -1, ctx.dim("d"), "rms_scale normalized axis")

    def dimmap(self, ctx: Ctx):
        return keep(0, len(ctx.ins[0]))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 3 * numel(ctx.ins[0])


class KdaRule(Primitive):
    """Kimi delta attention (KDA, ``chunk_kda`` / ``fused_recurrent_kda`` with
    ``use_qk_l2norm_in_kernel``): the gated delta rule with one decay per key channel.
    q, k [B, s, heads, d_k], v [B, s, heads, d_v], g [B, s, heads, d_k] (the forget-gate
    projection), b [B, s, heads] (write strength) → o [B, s, heads, d_v].  Weights A_log
    (stored as ``a_log``: Kimi-Linear [1, 1, heads, 1]; Kimi-K3 a flat vector) and dt_bias
    [heads · d_k].  The decay is g = −exp(A_log)·softplus(g + dt_bias), or with a lower
    bound L (``gate_lower_bound: 1``, Kimi-K3 ``gate_lower_bound``) g = L·σ(exp(A_log)·(g +
    dt_bias)); β = σ(b).

    Per token and head: l2-normalize q and k and scale q by 1/√d_k (7·d_k + 2, as the gated
    delta rule); the gate per key channel (add, softplus 3, multiply → 5; bounded: add,
    multiply, sigmoid 4, multiply → 7) and its exp (1); β 4; state S [d_k, d_v]: per-channel
    decay d_k·d_v, Sᵀk 2·d_k·d_v, δ = (v − Sᵀk)·β 2·d_v, S += k δᵀ 2·d_k·d_v, o = Sᵀq
    2·d_k·d_v.  Total heads·(7·d_k·d_v + 2·d_v + (8 + gate)·d_k + 6) per token, gate 5 or 7.
    Sources: transformers ``torch_recurrent_kda`` and KimiLinearDeltaAttention.forward
    (forget gate), SGLang KimiK3DeltaAttention (``gate_lower_bound``)."""

    math_class = "activation_gemm"

    arity = 5
    shape_kind = "explicit"
    needs_whole_last_axis = True  # l2-normalizes q and k over their head dim
    params = {
        "heads": Param(doc="query/key/value heads (linear_attn_config.num_heads)"),
        "d_k": Param(doc="query/key head dim"),
        "d_v": Param(doc="value head dim"),
        "a_log": Param("dims", doc="the stored shape of A_log (one decay rate per head is read)"),
        "gate_lower_bound": Param("flag", 0, "1: bounded gate L·σ(exp(A)·(g + dt_bias)); 0: −exp(A)·softplus(·)"),
    }

    def check(self, ctx: Ctx) -> None:
        for port, what, dim in ((0, "q", "d_k"), (1, "k", "d_k"), (2, "v", "d_v"), (3, "g", "d_k")):
            expect_rank(ctx, port, 4, f"kda_rule {what} [B, s, heads, {dim}]")
            expect_axis(ctx, port, 2, ctx.dim("heads"), f"kda_rule {what} heads")
            expect_axis(ctx, port, 3, ctx.dim(dim), f"kda_rule {what} head dim")
        expect_rank(ctx, 4, 3, "kda_rule b [B, s, heads]")
        expect_axis(ctx, 4, 2, ctx.dim("heads"), "kda_rule b")

    def dimmap(self, ctx: Ctx):
        return keep(2, 4)

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        h, dk = ctx.dim("heads"), ctx.dim("d_k")
        flat = Axis(f"{h.label} * {dk.label}", h.expr * dk.expr, h.value * dk.value)
        return [WeightDecl("A_log", tuple(ctx.dims["a_log"])), WeightDecl("dt_bias", (flat,))]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        h, dk, dv = (ctx.e(n) for n in ("heads", "d_k", "d_v"))
        gate = 7 if ctx.flag("gate_lower_bound") else 5
        return _tokens(ctx) * h * (7 * dk * dv + 2 * dv + (8 + gate) * dk + 6)
