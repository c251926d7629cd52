"""The DimMap: for every output axis, where it comes from.

A closed algebra of frozen dataclasses.  Shape inference reads it here; sharding
propagation (deployments) reads the same objects: a copied axis keeps its sharding, a
split axis puts it on the outermost part, merged axes carry it, new axes start replicated.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy


@dataclass(frozen=True)
class Axis:
    """One axis of a tensor: display label, symbolic size (dims), bound size."""

    label: str
    expr: sympy.Expr  # in model dim symbols and runtime symbols
    value: sympy.Expr  # model dims bound to numbers; runtime symbols kept

    @property
    def runtime(self) -> bool:
        return bool(self.value.free_symbols)


@dataclass(frozen=True)
class InputDim:
    """Output axis copied from input ``port``, axis ``axis``."""

    port: int
    axis: int


@dataclass(frozen=True)
class Split:
    """Output axis is part ``index`` of input axis ``axis`` split into ``parts``."""

    port: int
    axis: int
    parts: tuple[Axis, ...]
    index: int


@dataclass(frozen=True)
class Part:
    """Output axis is part ``index`` of input axis ``axis`` cut into consecutive ``parts``
    whose sizes add up to it (``torch.split``; a slice of a fused projection's output).
    Unlike :class:`Split` (a product: the outermost part carries the sharding), a part is a
    range of the axis: it stays sharded only where the range is whole pieces of the axis."""

    port: int
    axis: int
    parts: tuple[Axis, ...]
    index: int


@dataclass(frozen=True)
class Flatten:
    """Output axis merges input axes ``axes`` (consecutive) of input ``port``."""

    port: int
    axes: tuple[int, ...]


@dataclass(frozen=True)
class NewDim:
    """A new axis (not derived from an input axis): a weight's output features, ``c``…"""

    axis: Axis


@dataclass(frozen=True)
class Singleton:
    """A new axis of size 1."""


DimSpec = InputDim | Split | Part | Flatten | NewDim | Singleton
DimMap = tuple[DimSpec, ...]

ONE = Axis("1", sympy.Integer(1), sympy.Integer(1))


def apply_dimmap(dimmap: DimMap, inputs: list[list[Axis]]) -> list[Axis]:
    """The output shape of ``dimmap`` over input shapes ``inputs``."""
    out: list[Axis] = []
    for spec in dimmap:
        if isinstance(spec, InputDim):
            out.append(inputs[spec.port][spec.axis])
        elif isinstance(spec, Split | Part):
            out.append(spec.parts[spec.index])
        elif isinstance(spec, Flatten):
            axes = [inputs[spec.port][a] for a in spec.axes]
            out.append(
                Axis(
                    "*".join(a.label for a in axes),
                    sympy.Mul(*(a.expr for a in axes)),
                    sympy.Mul(*(a.value for a in axes)),
                )
            )
        elif isinstance(spec, NewDim):
            out.append(spec.axis)
        elif isinstance(spec, Singleton):
            out.append(ONE)
        else:  # pragma: no cover - closed algebra
            raise TypeError(spec)
    return out


def keep(port: int, rank: int, upto: int | None = None) -> tuple[InputDim, ...]:
    """Copy axes ``0..upto`` (default: all) of input ``port``."""
    end = rank if upto is None else upto
    return tuple(InputDim(port, i) for i in range(end))
