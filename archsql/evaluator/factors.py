"""Named factors: the few non-polynomial pieces of a cost formula.

A bound quantity is a sum of terms ``coef · B^a · s^b · c^k · f`` where ``f`` is 1 or one
named factor of the runtime symbols with a bound integer argument:

=============== ======================== ==============================================
name            sympy                    meaning
=============== ======================== ==============================================
``min_c``       ``Min(c, w)``            attended/cached positions capped by a window
``ceil_c_div``  ``ceiling(c / r)``       positions compressed along time by a ratio
``window_pairs````window_pairs(s, c, w)``causal (query, key) pairs under a window
``chunk_len``   ``chunk_len(c, C)``      positions of the current attention chunk
``chunk_pairs`` ``chunk_pairs(s, c, C)`` causal (query, key) pairs under chunked attention
``patches``     ``v**k``                 the image patches of a request, to the power k
=============== ======================== ==============================================

``patches`` carries the fourth runtime symbol, v (image patches a request brings this step,
a vision tower's tokens): a vision term is ``coef · B^a · v^k`` and never meets s or c, so
v rides in the term's one factor slot instead of an exponent column of its own; a term
with v and another named factor, or with v and s or c, is rejected.

Chunked (local) attention is not a sliding window: the sequence is cut into chunks of C
positions and a query sees only the keys of its own chunk, itself included.  The query at
absolute (1-based) position j sees ``(j − 1) mod C + 1`` keys — 1 right after a chunk
boundary, C at the chunk's end — so a step of s queries after c − s cached tokens attends
``Σ_{j=c−s+1}^{c} ((j − 1) mod C + 1)`` pairs (``chunk_pairs``), and the decode query at
position c attends ``chunk_len(c, C) = (c − 1) mod C + 1``.  ``chunk_len`` is also the
cache law of a chunked layer: it keeps the keys of the chunk holding the latest token (the
ones that token attended, at most C); older chunks are never read again.

The SQL side defines the same factors once, as DuckDB macros (``archsql/views/macros``);
tests check the macros against :func:`factor_value` on random inputs.
"""

from __future__ import annotations

import sympy

from archsql.schema.expr import RUNTIME_SYMBOLS

B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))
NONE = "none"


class window_pairs(sympy.Function):
    """Σ_{j=c−s+1}^{c} min(j, w): (query, key) pairs when s new queries follow c − s cached
    tokens and each query sees at most w keys (itself included).  w ≥ c: the plain causal
    count s·c − s(s−1)/2; decode (s = 1): min(c, w)."""

    @classmethod
    def eval(cls, s, c, w):
        if all(isinstance(a, sympy.Integer) for a in (s, c, w)):
            return sympy.Integer(window_pairs_int(int(s), int(c), int(w)))
        if s == 1:
            return sympy.Min(c, w)
        return None


def window_pairs_int(s: int, c: int, w: int) -> int:
    first = c - s + 1  # absolute position (1-based) of the first new query
    if c <= w:
        return s * c - s * (s - 1) // 2
    if first >= w:
        return s * w
    return (w * (w + 1) - first * (first - 1)) // 2 + (c - w) * w


class chunk_len(sympy.Function):
    """(c − 1) mod C + 1: keys the query at absolute position c sees under chunked attention
    (its own chunk up to itself), and the positions a chunked layer's cache keeps after a
    step that ends at context c.  c ≤ C: c; never more than C."""

    @classmethod
    def eval(cls, c, chunk):
        if all(isinstance(a, sympy.Integer) for a in (c, chunk)):
            return sympy.Integer(chunk_len_int(int(c), int(chunk)))
        return None


class chunk_pairs(sympy.Function):
    """Σ_{j=c−s+1}^{c} ((j − 1) mod C + 1): (query, key) pairs when s new queries follow
    c − s cached tokens under chunked attention of C positions per chunk.  c ≤ C: the plain
    causal count s·c − s(s−1)/2; decode (s = 1): chunk_len(c, C)."""

    @classmethod
    def eval(cls, s, c, chunk):
        if all(isinstance(a, sympy.Integer) for a in (s, c, chunk)):
            return sympy.Integer(chunk_pairs_int(int(s), int(c), int(chunk)))
        if s == 1:
            return chunk_len(c, chunk)
        return None


def chunk_len_int(c: int, chunk: int) -> int:
    return (c - 1) % chunk + 1 if c > 0 else 0


def _chunk_prefix_pairs(n: int, chunk: int) -> int:
    """Σ_{j=1}^{n} ((j − 1) mod C + 1): n // C full chunks of C(C+1)/2 pairs each, then
    the r = n mod C queries of the open chunk, r(r+1)/2."""
    full, r = divmod(n, chunk)
    return full * chunk * (chunk + 1) // 2 + r * (r + 1) // 2


def chunk_pairs_int(s: int, c: int, chunk: int) -> int:
    return _chunk_prefix_pairs(c, chunk) - _chunk_prefix_pairs(c - s, chunk)


def classify(atom: sympy.Expr) -> tuple[str, int] | None:
    """(name, argument) of a named-factor atom, or None when ``atom`` is not one."""
    if isinstance(atom, sympy.Min) and len(atom.args) == 2:
        a, b = atom.args
        if a == C and b.is_Integer:
            return "min_c", int(b)
        if b == C and a.is_Integer:
            return "min_c", int(a)
    if isinstance(atom, sympy.ceiling):
        ratio = sympy.simplify(C / atom.args[0])
        if ratio.is_Integer and ratio > 0:
            return "ceil_c_div", int(ratio)
    if isinstance(atom, window_pairs) and atom.args[0] == S and atom.args[1] == C and atom.args[2].is_Integer:
        return "window_pairs", int(atom.args[2])
    if isinstance(atom, chunk_len) and atom.args[0] == C and atom.args[1].is_Integer:
        return "chunk_len", int(atom.args[1])
    if isinstance(atom, chunk_pairs) and atom.args[0] == S and atom.args[1] == C and atom.args[2].is_Integer:
        return "chunk_pairs", int(atom.args[2])
    return None


def factor_value(name: str, arg: int, s: int, c: int, v: int = 0) -> int:
    """The factor at a workload (the reference the SQL macros are tested against); ``v``:
    image patches per request (0: a text-only workload)."""
    if name == NONE:
        return 1
    if name == "patches":
        return v**arg
    if name == "min_c":
        return min(c, arg)
    if name == "ceil_c_div":
        return -(-c // arg)
    if name == "window_pairs":
        return window_pairs_int(s, c, arg)
    if name == "chunk_len":
        return chunk_len_int(c, arg)
    if name == "chunk_pairs":
        return chunk_pairs_int(s, c, arg)
    raise KeyError(name)
