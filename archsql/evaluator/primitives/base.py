"""The primitive base class and registry.

A primitive is one small declarative class carrying, together: its parameters, its shape
rule (compiled to a DimMap), its weights, its FLOP formula and its instance multiplicity.
Defining a subclass registers it under the snake_case of its class name (``RmsNorm`` →
``rms_norm`` unless ``name`` is given).  All formulas are sympy expressions over the
node's dims (symbols or bound numbers) and the runtime symbols B, s, c — one expression
gives both the number and the display formula.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa
import sympy

from archsql.errors import unknown_name
from archsql.evaluator.dimmap import Axis, DimMap, apply_dimmap
from archsql.schema.ops import register_ops
from archsql.schema.tables import OP_KERNELS_SCHEMA, OP_MATH_SCHEMA

SHAPE_KINDS = (
    "preserve",
    "broadcast",
    "axis_replace",
    "axis_select",
    "axis_concat",
    "contract",
    "permute",
    "source",
    "explicit",
)


@dataclass(frozen=True)
class Param:
    """A node parameter under ``dims:``.

    kind: ``dim`` (a dim expression), ``flag`` (expression bound to 0/1),
    ``dims`` (list of dim expressions), ``ints`` (literal list of integers).
    """

    kind: str = "dim"
    default: object = None  # None = required
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class Contraction:
    """How a weighted op meets its main weight, for sharding propagation: output axis →
    weight axis it comes from, and (input port, input axis, weight axis) triples that are
    summed over.  ``reduced_weight_axes``: weight axes summed over without an input axis
    (an embedding gathers rows: a vocab-sharded table gives partial outputs)."""

    out_axes: dict[int, int]
    contracted: tuple[tuple[int, int, int], ...] = ()
    reduced_weight_axes: tuple[int, ...] = ()


@dataclass(frozen=True)
class WeightDecl:
    tensor: str  # 'weight', 'bias', …
    axes: tuple[Axis, ...]
    streamed: bool = True  # the whole tensor is read every step (False: only gathered rows, e.g. embeddings)
    # checkpoint name after the node's path; None: "." + tensor (``q_proj`` → ``q_proj.weight``).
    # Fused expert modules hold bare parameters: ``experts.gate_up_proj`` (suffix ""), and
    # ``experts.gate_up_proj_bias`` (suffix "_bias").
    suffix: str | None = None
    # the node's copies (routed experts) are stored as ONE tensor per layer, stacked along a
    # leading copies axis [copies, *axes]; the weights row keeps the per-copy shape, and the
    # name has no {expert} placeholder
    stacked: bool = False


class NodeShapeError(ValueError):
    """Raised inside a primitive; the walker adds the location."""

    def __init__(self, message: str, expected: str | None = None, got: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.expected, self.got, self.hint = expected, got, hint


@dataclass
class Ctx:
    """What a primitive sees of one node: its dims and its input shapes."""

    dims: dict[str, object]  # param -> Axis (dim/flag), list[Axis] (dims), list[int] (ints)
    ins: list[list[Axis]]
    node: str = ""
    out: list[Axis] = field(default_factory=list)
    phase: str = "prefill"  # prefill | decode: a few rules differ (which positions are sampled)

    def dim(self, name: str) -> Axis:
        return self.dims[name]  # type: ignore[return-value]

    def e(self, name: str) -> sympy.Expr:
        """Symbolic expression of a dim param."""
        return self.dim(name).expr

    def flag(self, name: str) -> bool:
        value = self.dim(name).value
        return bool(value)


def numel(shape: Sequence[Axis]) -> sympy.Expr:
    return sympy.Mul(*(a.expr for a in shape))


def leading(shape: Sequence[Axis], n: int = 1) -> sympy.Expr:
    """Product of all but the last ``n`` axes."""
    return sympy.Mul(*(a.expr for a in shape[: len(shape) - n]))


_REGISTRY: dict[str, type[Primitive]] = {}

MATH_CLASSES = ("weight_gemm", "activation_gemm", "vector")
# the ops of op_sol that are not primitives: collectives (a reduction adds element-wise) and
# the pipeline's point-to-point sends
COMMUNICATION_OPS = ("all_gather", "all_reduce", "all_to_all", "p2p", "ring_pass")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Primitive:
    name: ClassVar[str]
    arity: ClassVar[int | tuple[int, int]] = 1  # exact, or (min, max)
    params: ClassVar[dict[str, Param]] = {}
    shape_kind: ClassVar[str] = "explicit"
    default_role: ClassVar[str | None] = None
    doc: ClassVar[str] = ""
    # the measured op kind (archsql.kernel_corpus.registry) of the kernel this op launches; None:
    # its time is a kernel without a measured kind (element-wise, views, routing, scans, ...)
    kernel_kind: ClassVar[str | None] = None
    # the unit its FLOPs run on, which picks the peak that prices them (reports/op_sol):
    #   weight_gemm: a matmul by a stored weight — tensor cores at the precision the weight is
    #     stored in (a quantized weight: the deployment's matmul dtype, the activations being
    #     quantized to match, as vLLM's Fp8LinearMethod does; an unquantized one: the act dtype);
    #   activation_gemm: a matmul of activations or caches (attention score/apply, chunked
    #     scans) — tensor cores at the act dtype;
    #   vector: element-wise, norms, softmax, rope, routing — no tensor-core work (CUDA cores).
    math_class: ClassVar[str] = "vector"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return
        cls.name = cls.__dict__.get("name", _snake(cls.__name__))
        assert cls.shape_kind in SHAPE_KINDS, (cls, cls.shape_kind)
        assert cls.math_class in MATH_CLASSES, (cls, cls.math_class)
        if cls.name in _REGISTRY:
            raise RuntimeError(f"primitive '{cls.name}' registered twice ({_REGISTRY[cls.name]} and {cls})")
        _REGISTRY[cls.name] = cls

    # --- the rules (override) -------------------------------------------------------
    def check(self, ctx: Ctx) -> None:
        """Raise NodeShapeError when the inputs cannot be joined."""

    def dimmap(self, ctx: Ctx) -> DimMap:
        raise NotImplementedError

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        return []

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return sympy.Integer(0)

    def copies(self, ctx: Ctx) -> sympy.Expr:
        """Copies of this node per occurrence (routed experts: one per expert)."""
        return sympy.Integer(1)

    def contraction(self, ctx: Ctx) -> Contraction | None:
        """How the output relates to the main weight (None: no weight contraction)."""
        return None

    def default_weight_axes(self, ctx: Ctx) -> tuple[list[dict], tuple[Axis, ...]] | None:
        """How the op's table is split when its node declares no ``weight_axes``: the entries
        (as a node would write them) and the axes of the table they describe — the node's
        own main weight, or the table it reads from another node (a tied head).  A default
        the dims table does not allow (its ``parts`` dim not shardable by the group) is
        dropped (replicated).  None: replicated."""
        return None

    def io(self, ctx: Ctx) -> tuple[Sequence[sympy.Expr] | sympy.Expr, sympy.Expr]:
        """Activation elements the op reads and writes in memory (weights are counted from
        the weights table): (reads, writes).  Reads are per input port (a per-device view
        divides each port by the layout that port is consumed in); a single expression is
        allowed when it is 0 or the op has one input.  Default: every input read once, the
        output written once; pure views (reshapes that only re-label axes) override to (0, 0)."""
        return tuple(numel(shape) for shape in ctx.ins), numel(ctx.out)

    def cache_reads(self, ctx: Ctx) -> sympy.Expr:
        """Elements of decode caches (K/V, latents, states) the op reads in one step; they are
        stored in the deployment's cache dtype, so they are kept apart from activations."""
        return sympy.Integer(0)

    # Sharding needs, read by the layouts pass:
    #   needs_whole_last_axis: the op reduces or normalizes over the last axis of its inputs,
    #     so a sharded last axis is gathered first;
    #   partial_passes: the op is linear in its inputs, so a Partial (pending sum) passes
    #     through; every other op needs its inputs reduced first.
    needs_whole_last_axis: ClassVar[bool] = False
    # the ports whose last axis needs_whole_last_axis means (None: every input)
    whole_last_axis_ports: ClassVar[tuple[int, ...] | None] = None
    partial_passes: ClassVar[bool] = False

    def passes_partial(self, partials: Sequence[frozenset[str]]) -> bool:
        """Whether pending sums on the inputs (one set of groups per input) pass through this
        op unreduced — only where no weight splits the op over that group.  Default:
        ``partial_passes``; a sum passes them when every input has the same pending sums."""
        return self.partial_passes

    #   expert_route: the op moves tokens between the devices of expert parallelism —
    #     ``"send"``: every token travels to the devices holding its experts (an all-to-all;
    #     the experts then see every data-parallel rank's tokens); ``"return"``: the expert
    #     outputs come back to their tokens' own ranks (an all-to-all); None: neither.
    expert_route: ClassVar[str | None] = None

    # Context parallelism, read by the layouts pass (``context_parallel``):
    #   attention_stage: the op is a stage of an attention kernel whose port 1 holds the keys
    #     (``"score"``: q·kᵀ) or the values (``"apply"``: probs·v); under a split sequence
    #     the keys / values are exchanged (Ulysses all-to-all, ring passes), and an apply
    #     returns its output from heads to tokens;
    #   blockwise_context: the op reduces its last axis blockwise (online softmax), so a
    #     context axis split over cp need not be gathered (merged by log-sum-exp instead).
    attention_stage: ClassVar[str | None] = None
    blockwise_context: ClassVar[bool] = False

    def kv_cache_caps(self, params: dict[str, object]) -> dict[str, object]:
        """Caps on the positions this node attends (``{"window": w}``, ``{"chunk": n}``, by
        bound value) that the key/value caches of its component must declare with the same
        growth law (the walk's cache axioms).  Default: none."""
        return {}

    def active_copies(self, ctx: Ctx) -> sympy.Expr:
        """Copies one token uses (routed experts: top_k)."""
        return self.copies(ctx)

    # --- derived ---------------------------------------------------------------------
    def output_shape(self, ctx: Ctx) -> list[Axis]:
        self.check(ctx)
        return apply_dimmap(self.dimmap(ctx), ctx.ins)


def registry() -> dict[str, type[Primitive]]:
    # importing the families registers them
    from archsql.evaluator.primitives import (  # noqa: F401
        attention,
        elementwise,
        linear_like,
        norms,
        recurrent,
        routing,
        scaling,
        shape_ops,
        sparse,
        vision,
    )

    return _REGISTRY


def _op_traits() -> list[dict]:
    """Every node op with the traits the views join on: each primitive's class attributes
    (``kernel_kind``, ``attention_stage``, ``math_class``), then the communication ops (vector
    math: a reduction's adds; the measured kind of their kernel: ``COLLECTIVE_KERNEL_KINDS``)."""
    from archsql.evaluator.layouts import COLLECTIVE_KERNEL_KINDS

    rows = [
        {"op": name, "op_kind": cls.kernel_kind, "attention_stage": cls.attention_stage, "math_class": cls.math_class}
        for name, cls in sorted(registry().items())
    ]
    rows += [
        {"op": name, "op_kind": COLLECTIVE_KERNEL_KINDS.get(name), "attention_stage": None, "math_class": "vector"}
        for name in COMMUNICATION_OPS
    ]
    return rows


def op_kernels_table() -> pa.Table:
    """The ``op_kernels`` reference table: every op whose kernel has a measured op kind or
    that is a stage of an attention kernel (a flash-attention kernel runs its score's nodes
    up to the apply), with both."""
    rows = [r for r in _op_traits() if r["op_kind"] or r["attention_stage"]]
    return pa.Table.from_pylist(rows, schema=OP_KERNELS_SCHEMA)


def op_math_table() -> pa.Table:
    """The ``op_math`` reference table: the math class of every op."""
    return pa.Table.from_pylist(_op_traits(), schema=OP_MATH_SCHEMA)


register_ops(registry)  # the spec checks and quant schemes below read the ops through this hook


def get_primitive(name: str) -> type[Primitive]:
    reg = registry()
    if name not in reg:
        message, hint = unknown_name("op", name, reg)
        raise KeyError(message, hint)
    return reg[name]


def expect_axis(ctx: Ctx, port: int, axis: int, want: Axis, what: str) -> None:
    """Check that input ``port`` axis ``axis`` has the size of dim ``want``."""
    shape = ctx.ins[port]
    if not -len(shape) <= axis < len(shape):
        raise NodeShapeError(
            f"input {port} has rank {len(shape)}, no axis {axis} for {what}",
            expected=f"rank > {axis if axis >= 0 else -axis - 1}",
            got=fmt_shape(shape),
        )
    got = shape[axis]
    if sympy.simplify(got.value - want.value) != 0:
        raise NodeShapeError(
            f"{what}: input {port} axis {axis} is {got.label}={got.value}, but the node declares {want.label}={want.value}",
            expected=f"{want.label} = {want.value}",
            got=f"{got.label} = {got.value}",
            hint="check the producer of this input and the dims bound for this node",
        )


def expect_multiple(ctx: Ctx, name: str, of: str, what: str) -> None:
    """Check that dim ``name`` is a multiple of dim ``of`` (where both are numbers)."""
    n, d = ctx.dim(name).value, ctx.dim(of).value
    if n.is_number and d.is_number and n % d != 0:
        raise NodeShapeError(what, expected=f"{name} % {of} == 0", got=f"{name}={n}, {of}={d}")


def expect_rank(ctx: Ctx, port: int, rank: int, what: str) -> None:
    shape = ctx.ins[port]
    if len(shape) != rank:
        raise NodeShapeError(
            f"{what}: input {port} must have rank {rank}",
            expected=f"rank {rank}",
            got=f"rank {len(shape)} {fmt_shape(shape)}",
        )


def fmt_shape(shape: Sequence[Axis]) -> str:
    return "[" + ", ".join(f"{a.label}" for a in shape) + "]"
