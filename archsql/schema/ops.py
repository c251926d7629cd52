"""The op table the schema checks read, as a registered hook.

The primitives (one class per op: params, arity, shape rule, FLOPs) live in the evaluator, a
layer above the schema.  The evaluator registers its registry here when it is imported
(:mod:`archsql.evaluator.primitives.base`); the spec checks (known op, closed params, arity)
and the quant schemes (``applies_to.ops``) read it through :func:`known_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

_provider: Callable[[], Mapping[str, type]] | None = None


def register_ops(provider: Callable[[], Mapping[str, type]]) -> None:
    """Register the function that returns every op name → its primitive class."""
    global _provider
    _provider = provider


def known_ops() -> Mapping[str, type]:
    """Every op name → its primitive class (``params``, ``arity``, ``name``)."""
    if _provider is None:
        raise RuntimeError("no op registry is registered: import archsql.evaluator before checking specs")
    return _provider()
