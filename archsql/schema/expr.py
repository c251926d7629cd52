"""Safe expression parsing for specs.

Two small languages share one parser (Python ``ast``, never ``eval``):

* **dim expressions** in components: ``"n_heads * d_head"``, ``"d_kv_lora + d_qk_rope"``;
  names are dims (or runtime symbols) and become sympy symbols;
* **bindings** in models: ``config.hidden_size // config.num_attention_heads``,
  ``config.head_dim or config.hidden_size // config.num_attention_heads``;
  ``config.a.b`` reads the model's config.json, ``a or b`` falls back when ``a`` is
  absent or null, ``x if cond else y``, ``len(...)`` and ``config.a[i]`` are allowed.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from archsql.errors import ConfigError, SpecError, did_you_mean

# Runtime symbols describe a workload, not a model: batch, new tokens this step, context,
# and v, the image patches a request brings this step (a vision tower's tokens; 0 for text).
RUNTIME_SYMBOLS: dict[str, sympy.Symbol] = {
    name: sympy.Symbol(name, positive=True, integer=True) for name in ("B", "s", "c", "v")
}


def dim_symbols(dims_table: Mapping[str, dict]) -> dict[str, sympy.Symbol]:
    """A positive-integer symbol per declared dim, and the runtime symbols."""
    syms = {name: sympy.Symbol(name, positive=True, integer=True) for name in dims_table}
    syms.update(RUNTIME_SYMBOLS)
    return syms


# Resource bounds: an expression is a short formula over physical sizes, so a few thousand
# characters, a shallow tree and numbers below 2**128 hold every real spec (the catalog's
# longest is 145 characters; its largest number is below 2**40) while ``10 ** 10 ** 10`` or
# a megabyte of nested parentheses is refused at once instead of computing for hours.
MAX_EXPR_CHARS = 4_000
MAX_EXPR_DEPTH = 64
MAX_INT_BITS = 128
MAX_EXPONENT = 128

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


class ExprSyntaxError(SpecError):
    """Raised with a human message; callers attach the location.  A :class:`SpecError` (so a
    ``ValueError`` too): where no caller locates it, the CLI still prints it as a user error."""


class MissingConfigKey(ConfigError):
    """A binding read a config key that is absent; ``args`` = (dotted key, did-you-mean hint)
    for the callers that name the config file."""

    def __init__(self, key: str, hint: str | None):
        self.message = f"config key '{key}' is missing" + (f"; {hint}" if hint else "")
        super().__init__(self.message)
        self.args = (key, hint)

    def __str__(self) -> str:
        return self.message


def _too_big(value: int) -> bool:
    return abs(value).bit_length() > MAX_INT_BITS


def _check_int(value: Any, what: str) -> None:
    if isinstance(value, int) and _too_big(value):
        raise ExprSyntaxError(
            f"{what} is out of range: a {abs(value).bit_length()}-bit number, above 2**{MAX_INT_BITS}; "
            "an expression's numbers are physical sizes"
        )


def _check_power(base: Any, exponent: Any, text: str) -> None:
    """Refuse ``a ** b`` whose integer result would exceed 2**MAX_INT_BITS before computing it."""
    if isinstance(exponent, int) and abs(exponent) > MAX_EXPONENT and isinstance(base, int) and abs(base) > 1:
        raise ExprSyntaxError(f"exponent {exponent} in {text!r} is out of range (at most {MAX_EXPONENT})")
    if isinstance(exponent, int) and exponent > 0 and isinstance(base, int):
        bits = (abs(base).bit_length() - 1) * exponent
        if bits > MAX_INT_BITS:
            raise ExprSyntaxError(
                f"{text!r} is out of range: about 2**{bits}, above 2**{MAX_INT_BITS}; "
                "an expression's numbers are physical sizes"
            )


class FlagValue(int):
    """An integer that is a boolean where it was written (``true`` in a spec, a JSON
    ``true`` in the config): 0 or 1 to arithmetic, but a dim that is not a flag refuses it
    (``hidden_size: true`` is not a width of 1).  Arithmetic on it gives a plain int."""

    def __repr__(self) -> str:
        return "true" if self else "false"


class _Missing:
    """A config key that is absent (distinct from JSON null)."""

    def __init__(self, key: str, hint: str | None):
        self.key = key
        self.hint = hint


def _parse(text: str) -> ast.expr:
    if isinstance(text, bool):
        text = str(int(text))
    if isinstance(text, int | float):
        text = repr(text)
    if not isinstance(text, str):
        kind = (
            "a list"
            if isinstance(text, list)
            else "a mapping"
            if isinstance(text, dict)
            else "null"
            if text is None
            else type(text).__name__
        )
        raise ExprSyntaxError(f"expected an expression string or number, got {kind}")
    if len(text) > MAX_EXPR_CHARS:
        raise ExprSyntaxError(
            f"expression of {len(text):,} characters is too long (at most {MAX_EXPR_CHARS:,}): {text[:40]!r}…"
        )
    if "\x00" in text:
        raise ExprSyntaxError(f"expression {text[:40]!r} contains a NUL character")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprSyntaxError(f"cannot parse expression {text[:80]!r}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):  # nesting beyond the parser's stack
        raise ExprSyntaxError(f"expression {text[:40]!r}… is nested too deeply to parse") from None
    _check_depth(tree.body, text)
    return tree.body


def _check_depth(tree: ast.AST, text: str) -> None:
    """Refuse trees deeper than MAX_EXPR_DEPTH (the walks below recurse once per level)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH:
            raise ExprSyntaxError(f"expression {text[:40]!r}… is nested more than {MAX_EXPR_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def expr_names(text: str) -> set[str]:
    """Bare names used by a dim expression (function names excluded)."""
    tree = _parse(text)
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in funcs}


_DIM_FUNCS = {
    "min": sympy.Min,
    "max": sympy.Max,
    "ceil": sympy.ceiling,
    "floor": sympy.floor,
}


def parse_dim_expr(text: str | int, symbols: Mapping[str, sympy.Expr]) -> sympy.Expr:
    """Turn a dim expression into a sympy expression over ``symbols``.

    Unknown names raise ``ExprSyntaxError`` whose message carries a did-you-mean.
    """
    tree = _parse(text)

    def walk(node: ast.AST) -> sympy.Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise ExprSyntaxError(f"number {ast.unparse(node)} is out of range")
            _check_int(node.value, f"number {ast.unparse(node)}")
            return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Rational(str(node.value))
        if isinstance(node, ast.Name):
            if node.id in symbols:
                return symbols[node.id]
            hint = did_you_mean(node.id, symbols)
            raise ExprSyntaxError(f"unknown dim '{node.id}'" + (f"; {hint}" if hint else ""))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow):
                # a symbolic exponent would be computed once the dims are bound: only constants
                if not (right.is_Integer and abs(int(right)) <= MAX_EXPONENT):
                    raise ExprSyntaxError(
                        f"exponent in {ast.unparse(node)!r} must be an integer constant "
                        f"between -{MAX_EXPONENT} and {MAX_EXPONENT}, got {right}"
                    )
                if left.is_Integer:
                    _check_power(int(left), int(right), ast.unparse(node))
            try:
                if isinstance(node.op, ast.FloorDiv):
                    result = sympy.floor(left / right)
                else:
                    result = _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ExprSyntaxError(f"{ast.unparse(node)!r} divides by zero") from None
            return _finite(result, node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DIM_FUNCS:
            name, args = node.func.id, [walk(a) for a in node.args]
            arity_ok = len(args) == 1 if name in ("ceil", "floor") else len(args) >= 1
            if node.keywords or not arity_ok:
                want = "one argument" if name in ("ceil", "floor") else "one or more arguments"
                raise ExprSyntaxError(f"{name}() takes {want}: {ast.unparse(node)!r}")
            try:
                return _finite(_DIM_FUNCS[name](*args), node)
            except (TypeError, ValueError, ArithmeticError) as exc:
                raise ExprSyntaxError(f"cannot evaluate {ast.unparse(node)!r}: {exc}") from None
        raise ExprSyntaxError(
            f"unsupported syntax {ast.unparse(node)!r} in dim expression; "
            "use dims, integers, + - * / // **, min(), max(), ceil(), floor()"
        )

    return walk(tree)


def _finite(value: sympy.Expr, node: ast.AST) -> sympy.Expr:
    """A dim expression's value: no division by zero (sympy's zoo/nan/oo), numbers in range."""
    if value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise ExprSyntaxError(f"{ast.unparse(node)!r} divides by zero or is not finite")
    if value.is_Rational and (_too_big(int(value.p)) or _too_big(int(value.q))):
        _check_int(int(value.p) if _too_big(int(value.p)) else int(value.q), repr(ast.unparse(node)))
    return value


def eval_binding(text: str | int | bool, config: Mapping[str, Any]) -> Any:
    """Evaluate a model dim binding against ``config`` (the parsed config.json).

    Raises :class:`MissingConfigKey` (a ``KeyError``: args = key, did-you-mean) for an absent
    config key and ``ExprSyntaxError`` for unsupported syntax, wrong types, division by zero
    and numbers out of range (every bound above).
    """
    if isinstance(text, bool):
        return FlagValue(text)
    if isinstance(text, int):
        return text
    tree = _parse(text)

    def lookup(node: ast.AST) -> Any:
        # returns the value, or _Missing
        if isinstance(node, ast.Name) and node.id == "config":
            return config
        if isinstance(node, ast.Attribute):
            base = lookup(node.value)
            if isinstance(base, _Missing):
                return base
            if not isinstance(base, Mapping):
                raise ExprSyntaxError(f"'{ast.unparse(node.value)}' is not an object, cannot read .{node.attr}")
            if node.attr not in base:
                return _Missing(ast.unparse(node), did_you_mean(node.attr, base.keys()))
            return base[node.attr]
        raise ExprSyntaxError(f"unsupported syntax {ast.unparse(node)!r}")

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return FlagValue(node.value)
            if node.value is None or isinstance(node.value, int | float):
                _check_int(node.value, f"number {ast.unparse(node)}")
                return node.value
        if isinstance(node, ast.Name) and node.id in ("True", "False"):
            return FlagValue(node.id == "True")
        if isinstance(node, ast.Attribute):
            value = lookup(node)
            return _present(value, node)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            for i, operand in enumerate(node.values):
                last = i == len(node.values) - 1
                value = lookup(operand) if isinstance(operand, ast.Attribute) else walk(operand)
                if isinstance(value, _Missing) or value is None:
                    if last:
                        return _present(value, operand)
                    continue
                return FlagValue(value) if isinstance(value, bool) else value
        if isinstance(node, ast.IfExp):
            return walk(node.body) if walk(node.test) else walk(node.orelse)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = walk(node.left), walk(node.comparators[0])
            ops = {  # only the operator used is evaluated (== / != also compare with null)
                ast.Eq: lambda: left == right,
                ast.NotEq: lambda: left != right,
                ast.Lt: lambda: _num(left) < _num(right),
                ast.Gt: lambda: _num(left) > _num(right),
                ast.LtE: lambda: _num(left) <= _num(right),
                ast.GtE: lambda: _num(left) >= _num(right),
            }
            if type(node.ops[0]) in ops:
                return int(ops[type(node.ops[0])]())
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = _num(walk(node.left)), _num(walk(node.right))
            if isinstance(node.op, ast.Pow):
                _check_power(left, right, ast.unparse(node))
            try:
                value = _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                divisor = "" if isinstance(node.right, ast.Constant) else f" ({ast.unparse(node.right)} is 0)"
                raise ExprSyntaxError(f"'{ast.unparse(node)}' divides by zero{divisor}") from None
            except (OverflowError, ValueError, TypeError) as exc:
                raise ExprSyntaxError(f"cannot evaluate '{ast.unparse(node)}': {exc}") from None
            if isinstance(value, complex):  # a negative number to a fractional power
                raise ExprSyntaxError(f"'{ast.unparse(node)}' is not a real number")
            if isinstance(node.op, ast.Div) and math.isfinite(value) and float(value).is_integer():
                value = int(value)
            _check_int(value, f"'{ast.unparse(node)}'")
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -_num(walk(node.operand))
        if isinstance(node, ast.Subscript):  # an element of a config list: config.merge_kernel_size[0]
            seq, index = walk(node.value), walk(node.slice)
            if not isinstance(seq, list) or not isinstance(index, int) or not -len(seq) <= index < len(seq):
                raise ExprSyntaxError(
                    f"'{ast.unparse(node)}' reads element {index!r} of {type(seq).__name__} "
                    f"{seq!r}; [i] takes an integer index of a config list"
                )
            return seq[index]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [walk(a) for a in node.args]
            funcs = {"len": len, "min": min, "max": max, "ceil": math.ceil, "int": int}
            if node.func.id in funcs and not node.keywords:
                try:
                    value = funcs[node.func.id](*args)
                except (TypeError, ValueError, OverflowError) as exc:
                    raise ExprSyntaxError(f"cannot evaluate '{ast.unparse(node)}': {exc}") from None
                _check_int(value, f"'{ast.unparse(node)}'")
                return value
        raise ExprSyntaxError(
            f"unsupported syntax {ast.unparse(node)!r} in binding; use config.<key>, numbers, "
            "arithmetic, 'a or b', 'x if cond else y', len(), config.<list>[i]"
        )

    def _present(value: Any, node: ast.AST) -> Any:
        if isinstance(value, _Missing):
            raise MissingConfigKey(value.key, value.hint)
        return FlagValue(value) if isinstance(value, bool) else value

    return walk(tree)


def _num(value: Any) -> int | float:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    raise ExprSyntaxError(f"expected a number, got {type(value).__name__} {value!r}")


def substitute_dims(text: Any, mapping: Mapping[str, Any]) -> tuple[Any, set[str]]:
    """``text`` (a dim expression, a number, or a list of them) with every dim named in
    ``mapping`` replaced by its expression; also the names replaced.  Used for per-template
    dim overrides: ``"n_kv_heads * d_head"`` with ``{n_kv_heads: n_kv_heads_swa}`` reads
    ``"n_kv_heads_swa * d_head"``.  Anything that does not parse is returned unchanged (the
    parser reports it where it is used)."""
    if isinstance(text, list):
        items = [substitute_dims(t, mapping) for t in text]
        return [t for t, _ in items], set().union(*(names for _, names in items))
    if not isinstance(text, str) or not mapping:
        return text, set()
    try:
        tree = _parse(text)
        names = expr_names(text) & set(mapping)
    except ExprSyntaxError:
        return text, set()
    if not names:
        return text, set()

    class _Subst(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in names:
                return _parse(str(mapping[node.id]))
            return node

    return ast.unparse(_Subst().visit(tree)), names
