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

from archsql.errors import did_you_mean

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


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


class ExprSyntaxError(ValueError):
    """Raised with a human message; callers attach the location."""


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
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprSyntaxError(f"cannot parse expression {text!r}: {exc.msg}") from None
    return tree.body


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
            return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Rational(str(node.value))
        if isinstance(node, ast.Name):
            if node.id in symbols:
                return symbols[node.id]
            hint = did_you_mean(node.id, symbols)
            raise ExprSyntaxError(f"unknown dim '{node.id}'" + (f"; {hint}" if hint else ""))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.FloorDiv):
                return sympy.floor(left / right)
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DIM_FUNCS:
            return _DIM_FUNCS[node.func.id](*(walk(a) for a in node.args))
        raise ExprSyntaxError(
            f"unsupported syntax {ast.unparse(node)!r} in dim expression; "
            "use dims, integers, + - * / // **, min(), max(), ceil(), floor()"
        )

    return walk(tree)


def eval_binding(text: str | int | bool, config: Mapping[str, Any]) -> Any:
    """Evaluate a model dim binding against ``config`` (the parsed config.json).

    Raises ``KeyError(message)`` for an absent config key (message carries a did-you-mean)
    and ``ExprSyntaxError`` for unsupported syntax or wrong types.
    """
    if isinstance(text, bool):
        return int(text)
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
                return int(node.value)
            if node.value is None or isinstance(node.value, int | float):
                return node.value
        if isinstance(node, ast.Name) and node.id in ("True", "False"):
            return int(node.id == "True")
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
                return int(value) if isinstance(value, bool) else value
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
            value = _BINOPS[type(node.op)](left, right)
            if isinstance(node.op, ast.Div) and float(value).is_integer():
                value = int(value)
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
            if node.func.id in funcs:
                return funcs[node.func.id](*args)
        raise ExprSyntaxError(
            f"unsupported syntax {ast.unparse(node)!r} in binding; use config.<key>, numbers, "
            "arithmetic, 'a or b', 'x if cond else y', len(), config.<list>[i]"
        )

    def _present(value: Any, node: ast.AST) -> Any:
        if isinstance(value, _Missing):
            raise KeyError(value.key, value.hint)
        return int(value) if isinstance(value, bool) else value

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
