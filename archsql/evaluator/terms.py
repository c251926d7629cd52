"""Formula as data: a bound sympy expression → canonical term rows, plus printers.

A quantity bound to a model is a polynomial in the runtime symbols B, s, c with rational
coefficients, times at most one named factor (``min(c, window)``, ``ceil(c / ratio)``,
``window_pairs(s, c, window)``, and ``v^k`` for a vision tower's image patches — see
factors.py); each term becomes one row
(coef, e_B, e_s, e_c, factor, factor_arg), sorted so equal formulas give equal rows.  The same expression printed by :class:`DuckDBPrinter` is the
SQL over workload columns; printed by :func:`display` it is the human formula.
"""

from __future__ import annotations

import functools

import sympy
from sympy.printing.str import StrPrinter

from archsql.errors import EvaluationError
from archsql.evaluator.factors import NONE, classify, factor_value
from archsql.schema.expr import RUNTIME_SYMBOLS

B, S, C, V = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c", "v"))
RUNTIME = (B, S, C)
# v (image patches per request) is carried by the named factor 'patches' (factors.py);
# its column lives in the workload_images parameter table
WORKLOAD_COLUMNS = {B: "batch", S: "new_tokens", C: "context", V: "image_patches"}
PATCHES = "patches"


Term = tuple[float, int, int, int, str, int]  # coef, e_B, e_s, e_c, factor, factor_arg


def to_terms(expr: sympy.Expr) -> list[Term]:
    """Rows (coef, e_B, e_s, e_c, factor, factor_arg) of a dims-bound expression,
    canonically sorted.  Non-polynomial pieces must be named factors (see factors.py),
    at most one per term."""
    return list(_to_terms(expr))


# The printers are pure functions of the expression; a model whose layers are expanded
# several times (history-length groups of a read: all stream) repeats the same expressions,
# so each distinct one is converted once.
@functools.lru_cache(maxsize=1 << 16)
def _to_terms(expr: sympy.Expr) -> tuple[Term, ...]:
    expr = sympy.expand(expr)
    if expr == 0:
        return ()
    extra = expr.free_symbols - {*RUNTIME, V}
    if extra:
        raise EvaluationError(f"expression {expr} still has unbound dims {sorted(map(str, extra))}")
    placeholders: dict[sympy.Symbol, tuple[str, int]] = {}
    replace: dict[sympy.Expr, sympy.Symbol] = {}
    for atom in expr.atoms(sympy.Function, sympy.Min, sympy.Max):
        named = classify(atom)
        if named is None:
            raise EvaluationError(
                f"'{atom}' in {expr} is not a named factor "
                "(min(c, window), ceil(c / ratio), window_pairs, chunk_len, chunk_pairs)"
            )
        sym = sympy.Symbol(f"_factor{len(placeholders)}")
        placeholders[sym] = named
        replace[atom] = sym
    poly = sympy.Poly(expr.xreplace(replace), *RUNTIME, V, *placeholders)
    rows: list[Term] = []
    for monom, coef in poly.terms():
        if coef == 0:
            continue
        used = [(sym, e) for sym, e in zip(placeholders, monom[4:], strict=True) if e]
        if len(used) > 1 or any(e > 1 for _, e in used):
            raise EvaluationError(f"a term of {expr} multiplies named factors; each term may hold one")
        name, arg = placeholders[used[0][0]] if used else (NONE, 0)
        if monom[3]:  # image patches: the term's factor is v^k (it never meets s, c or another factor)
            if used or monom[1] or monom[2]:
                raise EvaluationError(
                    f"a term of {expr} multiplies image patches v with new tokens, context or a named "
                    "factor; a vision term is coef · B^a · v^k"
                )
            name, arg = PATCHES, int(monom[3])
        rows.append((float(coef), *map(int, monom[:3]), name, arg))
    return tuple(sorted(rows, key=lambda r: (r[1], r[2], r[3], r[4], r[5], r[0])))


def evaluate_terms(rows, batch: int, new_tokens: int, context: int, image_patches: int = 0) -> float:
    return sum(
        coef * batch**b * new_tokens**s * context**c * factor_value(name, arg, new_tokens, context, image_patches)
        for coef, b, s, c, name, arg in rows
    )


class DuckDBPrinter(StrPrinter):
    """Prints a bound expression as DuckDB SQL over the workloads columns (evaluated in
    DOUBLE: coefficients times BIGINT columns overflow 64-bit integers)."""

    def _print_Symbol(self, expr):
        return f"{WORKLOAD_COLUMNS.get(expr, expr.name)}::DOUBLE"

    def _print_Rational(self, expr):
        return f"({expr.p}.0/{expr.q})"

    def _print_Pow(self, expr, rational=False):
        base, exp = expr.as_base_exp()
        if exp.is_Integer and exp > 0:
            return "*".join([self.parenthesize(base, 100)] * int(exp))
        return f"pow({self._print(base)}, {self._print(exp)})"

    def _print_Min(self, expr):
        return "least(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Max(self, expr):
        return "greatest(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_ceiling(self, expr):
        return f"ceil({self._print(expr.args[0])})"

    def _print_floor(self, expr):
        return f"floor({self._print(expr.args[0])})"

    def _print_window_pairs(self, expr):
        return "window_pairs(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_chunk_len(self, expr):  # integer arithmetic (mod): BIGINT arguments
        return "chunk_len(" + ", ".join(f"({self._print(a)})::BIGINT" for a in expr.args) + ")"

    def _print_chunk_pairs(self, expr):
        return "chunk_pairs(" + ", ".join(f"({self._print(a)})::BIGINT" for a in expr.args) + ")"


_SQL = DuckDBPrinter({"order": "grlex"})


@functools.lru_cache(maxsize=1 << 16)
def to_sql(expr: sympy.Expr) -> str:
    return _SQL.doprint(sympy.expand(expr))


@functools.lru_cache(maxsize=1 << 16)
def display(expr: sympy.Expr) -> str:
    """Human formula: factored where it reads better, '·' for products."""
    expr = sympy.factor_terms(expr)
    return sympy.sstr(expr, order="grlex").replace("**", "^").replace("*", "·")
