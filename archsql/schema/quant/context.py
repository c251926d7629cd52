"""A model spec's ``quant_context``: which scheme stores which weight (default, roles,
named overrides by module-path pattern, ignore), and the glob patterns it matches with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from archsql.dtypes import DTYPE_BITS
from archsql.errors import Issue, did_you_mean, unknown_name
from archsql.schema.checks import Collector, type_name
from archsql.schema.quant.names import canonical_name
from archsql.schema.quant.schemes import NONE, QuantScheme, glob_ok

CONTEXT_KEYS = ("dtype", "from_config", "default", "roles", "overrides", "ignore")
RULE_KEYS = ("method", "dtype", "params")
OVERRIDE_KEYS = ("name", "match", "tensors", "method", "dtype", "params", "doc")


@dataclass(frozen=True)
class Rule:
    """A storage decision: a scheme, its params, and (for ``none``) the dtype."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    label: str = "default"
    where: Issue | None = None  # location (file, line, column, path) where the rule is written


@dataclass(frozen=True)
class Pattern:
    text: str  # as written
    regex: re.Pattern
    label: str  # 'override:<name>' | 'ignore:<pattern>'
    where: Issue | None


@dataclass
class Override:
    name: str
    patterns: list[Pattern]
    tensors: frozenset[str] | None
    rule: Rule


@dataclass
class QuantContext:
    dtype: str | None = None
    dtype_where: Issue | None = None
    from_config: bool = True
    default: Rule | None = None
    roles: dict[str, Rule] = field(default_factory=dict)
    overrides: list[Override] = field(default_factory=list)
    ignore: list[Pattern] = field(default_factory=list)
    given: set[str] = field(default_factory=set)  # keys written (profiles replace only these)

    def merged(self, profile: QuantContext) -> QuantContext:
        """This context with every key the profile writes replaced (from_config off)."""
        out = QuantContext(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        for key in profile.given:
            setattr(out, key, getattr(profile, key))
        if "dtype" in profile.given:
            out.dtype_where = profile.dtype_where
        out.from_config = False
        return out


def located(col: Collector, obj: Any, key: Any, path: str) -> Issue:
    probe = Collector(col.file)
    probe.add(obj, key, path, "")
    return probe.issues[0]


def glob_regex(pattern: str) -> re.Pattern:
    """A glob as a whole module path, an enclosing module, or a trailing dotted part."""
    body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(rf"(?:{body})(?:\..*)?|.*\.(?:{body})", re.DOTALL)


def parse_quant_context(
    raw: Any,
    col: Collector,
    schemes: Mapping[str, QuantScheme],
    roles: Mapping[str, Any],
    path: str = "$.quant_context",
) -> QuantContext:
    qc = QuantContext()
    if raw is None:
        return qc
    if not col.keys(raw, path, CONTEXT_KEYS):
        return qc
    qc.given = set(raw)
    if "dtype" in raw:
        qc.dtype = dtype_field(col, raw, "dtype", f"{path}.dtype")
        qc.dtype_where = located(col, raw, "dtype", f"{path}.dtype")
    if "from_config" in raw and col.type(raw, "from_config", path, (bool,), "true or false"):
        qc.from_config = bool(raw["from_config"])
    if "default" in raw:
        qc.default = _rule(col, raw, "default", f"{path}.default", schemes, "default")
    if "roles" in raw:
        mapping = raw["roles"]
        if col.keys(mapping, f"{path}.roles", roles, what="role", at=(raw, "roles")):
            for role in mapping:
                rule = _rule(col, mapping, role, f"{path}.roles.{role}", schemes, f"role:{role}")
                if rule is not None:
                    qc.roles[role] = rule
    if "overrides" in raw:
        items = raw["overrides"]
        if not isinstance(items, list):
            col.add(
                raw,
                "overrides",
                f"{path}.overrides",
                "overrides must be a list of named rules",
                got=type_name(items),
                value=True,
            )
            items = []
        names: set[str] = set()
        for i, item in enumerate(items):
            p = f"{path}.overrides[{i}]"
            if not col.keys(item, p, OVERRIDE_KEYS, ("name", "match"), at=(items, i)):
                continue
            name = item.get("name")
            if not isinstance(name, str) or name in names:
                col.add(item, "name", f"{p}.name", "each override needs a unique name", got=type_name(name), value=True)
                continue
            names.add(name)
            if "method" not in item and "dtype" not in item:
                col.add(
                    item,
                    None,
                    p,
                    "an override needs a method or a dtype",
                    hint="add 'method: <scheme>' or 'dtype: F32'",
                )
                continue
            rule = _rule(col, item, None, p, schemes, f"override:{name}")
            patterns = _patterns(col, item, "match", f"{p}.match", f"override:{name}")
            tensors = item.get("tensors")
            if tensors is not None and not glob_ok(tensors):
                col.add(
                    item,
                    "tensors",
                    f"{p}.tensors",
                    "tensors must list tensor names (weight, bias, ...)",
                    got=type_name(tensors),
                    value=True,
                )
                tensors = None
            if rule is not None and patterns:
                qc.overrides.append(Override(name, patterns, frozenset(tensors) if tensors else None, rule))
    if "ignore" in raw:
        qc.ignore = _patterns(col, raw, "ignore", f"{path}.ignore", "ignore")
    return qc


def dtype_field(col: Collector, obj: Any, key: str, path: str) -> str | None:
    value = obj.get(key)
    if value in DTYPE_BITS:
        return value
    message, hint = unknown_name("dtype", str(value), DTYPE_BITS)
    col.add(obj, key, path, f"{message} (a safetensors dtype)", hint=hint, value=True)
    return None


def _rule(col, obj, key, path, schemes, label) -> Rule | None:
    """``method-name`` or ``{method, dtype, params}`` at ``obj[key]`` (``obj`` itself when key is None)."""
    raw = obj if key is None else obj.get(key)
    where = located(col, obj, key, path)
    if isinstance(raw, str):
        method_at: tuple[Any, Any] = (obj, key)
        raw = {"method": raw}
    elif key is not None and not col.keys(raw, path, RULE_KEYS, at=(obj, key)):
        return None
    else:
        method_at = (raw, "method")
    method = raw.get("method", NONE)
    if method not in schemes:
        message, hint = unknown_name("quant method", str(method), schemes)
        col.add(
            *method_at, f"{path}.method", message, hint=f"{hint} (schemes live in archsql/specs/quant/)", value=True
        )
        return None
    scheme = schemes[method]
    dtype = None
    if "dtype" in raw:
        if method != NONE:
            col.add(
                raw,
                "dtype",
                f"{path}.dtype",
                f"dtype goes with method '{NONE}'; scheme '{method}' fixes its own dtypes",
                hint="set the scheme's dtype params under params:",
            )
            return None
        dtype = dtype_field(col, raw, "dtype", f"{path}.dtype")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        col.add(
            raw, "params", f"{path}.params", "params map scheme params to values", got=type_name(params), value=True
        )
        return None
    for name, value in params.items():
        p = scheme.params.get(name)
        if p is None:
            message, hint = unknown_name(f"param of scheme '{method}'", name, scheme.params)
            col.add(params, name, f"{path}.params.{name}", message, hint=hint)
        elif p.kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            col.add(
                params, name, f"{path}.params.{name}", f"param '{name}' is an integer", got=type_name(value), value=True
            )
        elif p.kind == "dtype" and value not in DTYPE_BITS:
            message, hint = unknown_name("dtype", str(value), DTYPE_BITS)
            col.add(params, name, f"{path}.params.{name}", message, hint=hint, value=True)
    return Rule(method, dict(params), dtype, label, where)


def _patterns(col, obj, key, path, label) -> list[Pattern]:
    raw = obj.get(key)
    items = [raw] if isinstance(raw, str) else raw
    if not glob_ok(items) or not items:
        col.add(obj, key, path, "expected a module-path glob or a list of them", got=type_name(raw), value=True)
        return []
    out = []
    for i, text in enumerate(items):
        where = located(col, raw, i, f"{path}[{i}]") if isinstance(raw, list) else located(col, obj, key, path)
        out.append(
            Pattern(text, glob_regex(canonical_name(text)), f"ignore:{text}" if label == "ignore" else label, where)
        )
    return out


def matches(regex: re.Pattern, module: str, full: str) -> bool:
    return regex.fullmatch(module) is not None or regex.fullmatch(full) is not None


def suggest(name: str, choices) -> str | None:
    return did_you_mean(name, choices)
