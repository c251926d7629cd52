"""Quantization as data: the schemes of ``archsql/specs/quant/*.yaml``, the ``quant_context``
of a model spec, precision profiles, and what a checkpoint's own quantization config says.

A **scheme** is one on-disk form of a logical weight: its storage dtype and packing factor
(logical elements per stored element), the name of the stored tensor (``{name}`` = the
logical tensor name, ``{module}`` = its module path), its sibling tensors (scales, zero
points, group indices) with shape formulas over the logical trailing axes (``axes:``, e.g.
``rows``/``cols`` = ``[out, in]``) and the scheme's integer params, the element format and
the scale granularity, and how a config's ``quantization_config`` (or a ModelOpt
``hf_quant_config.json``) selects it.  Formulas go through the safe dim-expression parser
(:func:`archsql.schema.expr.parse_dim_expr`), never ``eval``.  Adding a scheme is adding a
YAML file.

A **quant_context** (model spec key) says which scheme stores which weight::

    quant_context:
      dtype: BF16                     # storage dtype of what is not quantized (default: config torch_dtype)
      from_config: true               # also read quantization_config / hf_quant_config.json (default)
      default: { method: fp8_block }  # quantizable weights without a more specific rule
      roles: { mtp: none }            # per role
      overrides:                      # named, by module-path pattern; first match wins
        - { name: fp32_bias, match: "*.e_score_correction_bias", dtype: F32 }
      ignore: [lm_head]               # modules kept unquantized (modules_to_not_convert)

Precedence for one tensor: overrides → ignore → roles → default → ``none``.  A scheme
applies only to the ops and tensors it names (``applies_to``); elsewhere the tensor falls
back to ``none`` in the storage dtype.  A **profile** (``specs/quant/profiles/*.yaml``) is a
quant_context that replaces the keys it gives — "deploy in NVFP4" — through the same code
path (:mod:`archsql.evaluator.storage`).

Patterns are globs (``*`` spans dots) matched against a tensor's module path and its full
name, as a whole, as an enclosing module (``model.layers.0`` matches everything in layer 0)
or as a trailing part (``gate`` matches ``model.layers.3.mlp.gate``, not ``gate_proj``); a
pattern may name layers, not single experts (expert names keep their ``{expert}``
placeholder while matching).  Multimodal prefixes (``checkpoint_prefixes.yaml``) are
normalized in patterns as they are in tensor names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import sympy

from archsql.dtypes import DTYPE_BITS, TORCH_DTYPES, dtype_description
from archsql.errors import Issue, SpecError, did_you_mean, unknown_name
from archsql.schema.checks import Collector, type_name
from archsql.schema.expr import ExprSyntaxError, parse_dim_expr
from archsql.schema.yamlsrc import LocDict, load_yaml

SPECS_DIR = Path(__file__).parents[1] / "specs"
QUANT_DIR = SPECS_DIR / "quant"
PROFILES_DIR = QUANT_DIR / "profiles"
PREFIXES_FILE = SPECS_DIR / "checkpoint_prefixes.yaml"

SCHEME_KEYS = (
    "scheme",
    "doc",
    "source",
    "element_format",
    "scale_granularity",
    "params",
    "applies_to",
    "axes",
    "data",
    "siblings",
    "from_config",
)
SCHEME_REQUIRED = ("scheme", "doc", "element_format", "scale_granularity", "applies_to", "axes", "data")
GRANULARITIES = ("none", "tensor", "channel", "group", "block")
PARAM_KEYS = ("kind", "default", "doc")
PARAM_KINDS = ("int", "dtype")
CONTEXT = "context"  # a dtype param default: the quant_context's storage dtype
APPLIES_KEYS = ("ops", "tensors")
DATA_KEYS = ("name", "dtype", "packing", "shape")
SIBLING_KEYS = ("name", "dtype", "shape", "when", "doc")
FROM_CONFIG_KEYS = ("when", "requires", "params", "ignore")
ELLIPSIS = "..."
NONE = "none"

CONTEXT_KEYS = ("dtype", "from_config", "default", "roles", "overrides", "ignore")
RULE_KEYS = ("method", "dtype", "params")
OVERRIDE_KEYS = ("name", "match", "tensors", "method", "dtype", "params", "doc")
PROFILE_KEYS = ("profile", "doc", "quant_context")
BUFFER_KEYS = ("node", "shape", "dtype", "doc")


class FormulaError(ValueError):
    """A shape formula that does not give a positive whole number for a tensor."""


# --------------------------------------------------------------------------- schemes


@dataclass(frozen=True)
class SchemeParam:
    name: str
    kind: str  # int | dtype
    default: Any  # int, a dtype, 'context', or None (required)
    doc: str = ""


@dataclass(frozen=True)
class PartSpec:
    """One stored tensor of a scheme: the data part or a sibling."""

    part: str  # 'data' or the sibling's key
    name: str  # template over {name} / {module}
    dtype: str  # a safetensors dtype, or the name of a dtype param
    shape: tuple[Any, ...]  # '...', ints, formulas
    packing: int | None = None  # data part: logical elements per stored element
    when: str | None = None  # sibling present only when this int param is non-zero
    doc: str = ""


@dataclass(frozen=True)
class FromConfig:
    """When a checkpoint's quantization config selects a scheme, and with which params."""

    when: dict[str, Any]  # config path -> value (or list of accepted values)
    requires: tuple[str, ...]
    params: dict[str, Any]  # param -> config path (str) or literal int
    ignore: tuple[str, ...]  # config paths of module lists kept unquantized


@dataclass(frozen=True)
class QuantScheme:
    name: str
    file: str
    doc: str
    source: str
    element_format: str
    scale_granularity: str
    params: dict[str, SchemeParam]
    ops: frozenset[str] | None  # None = every op
    tensors: frozenset[str] | None  # None = every tensor
    axes: tuple[str, ...]
    data: PartSpec
    siblings: tuple[PartSpec, ...]
    from_config: tuple[FromConfig, ...] = ()

    @property
    def packing(self) -> int:
        return int(self.data.packing or 1)

    def applies(self, op: str | None, tensor: str, rank: int) -> bool:
        return (
            (self.ops is None or op in self.ops)
            and (self.tensors is None or tensor in self.tensors)
            and rank >= len(self.axes)
        )

    def bind_params(self, given: Mapping[str, Any], context_dtype: str | None) -> dict[str, Any]:
        """Scheme params: defaults, then ``given``; a dtype param defaulting to 'context'
        takes the quant_context's storage dtype."""
        out: dict[str, Any] = {}
        for name, p in self.params.items():
            value = given.get(name, p.default)
            if value == CONTEXT:
                value = context_dtype
            out[name] = value
        return out

    def parts(self, params: Mapping[str, Any]) -> list[PartSpec]:
        return [self.data, *(s for s in self.siblings if s.when is None or params.get(s.when))]

    def axis_sources(self, rank: int, params: Mapping[str, Any]) -> dict[str, list[tuple[int | None, int]]]:
        """Where each stored axis of every part comes from, for a logical tensor of ``rank``
        axes (the shape :meth:`stored` is given): ``(axis, divisor)`` with stored size =
        ceil(logical size / divisor) — so a device holding a slab of the logical axis holds
        ceil(slab / divisor) of the stored one (a block-scale grid: ceil(rows / 128)) — or
        ``(None, 1)`` when the size follows no logical axis (a per-tensor scale, a block
        width).  Read by per-device storage views through the layouts."""
        lead = rank - len(self.axes)
        ints = {k: sympy.Integer(v) for k, v in params.items() if self.params[k].kind == "int"}
        probe = sympy.Integer(2**20 * 3**4 * 5**2 * 7)  # divisible by any block or group width used
        out: dict[str, list[tuple[int | None, int]]] = {}
        for part in self.parts(params):
            sources: list[tuple[int | None, int]] = []
            for item in part.shape:
                if item == ELLIPSIS:
                    sources.extend((i, 1) for i in range(lead))
                    continue
                sources.append(self._axis_source(item, ints, probe, lead))
            out[part.part] = sources
        return out

    def _axis_source(self, item: Any, ints: dict, probe: sympy.Integer, lead: int) -> tuple[int | None, int]:
        axis_symbols = {a: sympy.Symbol(a) for a in self.axes}
        expr = parse_dim_expr(item, {**ints, **axis_symbols})
        used = [a for a in self.axes if axis_symbols[a] in expr.free_symbols]
        if len(used) != 1:
            return None, 1
        sym = axis_symbols[used[0]]
        step = expr.xreplace({sym: 2 * probe}) - expr.xreplace({sym: probe})
        divisor = probe / step if step != 0 else None
        if divisor is None or not (divisor.is_Integer and divisor > 0):
            return None, 1
        return lead + self.axes.index(used[0]), int(divisor)

    def stored(
        self, name: str, module: str, shape: list[int], params: Mapping[str, Any]
    ) -> list[tuple[str, str, str | None, list[int], int | None]]:
        """(part, name, dtype, shape, packing) of every stored tensor of one logical tensor.
        Raises :class:`FormulaError` when a formula is not a positive whole number."""
        n = len(self.axes)
        lead, trail = list(shape[: len(shape) - n]), shape[len(shape) - n :]
        symbols = {a: sympy.Integer(v) for a, v in zip(self.axes, trail, strict=True)}
        symbols |= {k: sympy.Integer(v) for k, v in params.items() if self.params[k].kind == "int"}
        out = []
        for part in self.parts(params):
            dims: list[int] = []
            for item in part.shape:
                if item == ELLIPSIS:
                    dims.extend(lead)
                    continue
                value = parse_dim_expr(item, symbols)
                if not (value.is_Integer and value > 0):
                    axes = ", ".join(f"{a} = {v}" for a, v in zip(self.axes, trail, strict=True))
                    args = ", ".join(f"{k} = {params[k]}" for k in self.params if self.params[k].kind == "int")
                    raise FormulaError(
                        f"{self.name} {part.part} axis '{item}' is {value} for {axes}"
                        + (f" ({args})" if args else "")
                        + ": not a positive whole number"
                    )
                dims.append(int(value))
            dtype = params.get(part.dtype, part.dtype) if part.dtype in self.params else part.dtype
            stored_name = part.name.replace("{name}", name).replace("{module}", module)
            out.append((part.part, stored_name, dtype, dims, part.packing))
        return out


def _glob_ok(obj: Any) -> bool:
    return isinstance(obj, list) and all(isinstance(v, str) for v in obj)


def parse_scheme(path: Path, ops: set[str] | None = None) -> tuple[QuantScheme | None, Collector]:
    """A scheme file, closed: every issue located, collected."""
    data = load_yaml(path)
    col = Collector(str(path))
    if not col.keys(data, "$", SCHEME_KEYS, SCHEME_REQUIRED):
        return None, col
    for key in ("scheme", "doc", "element_format", "scale_granularity", *(k for k in ("source",) if k in data)):
        col.type(data, key, "$", (str,), "text")
    if data.get("scheme") != path.stem and isinstance(data.get("scheme"), str):
        col.add(
            data,
            "scheme",
            "$.scheme",
            "scheme name must equal the file name",
            expected=path.stem,
            got=data["scheme"],
            value=True,
        )
    if data.get("scale_granularity") not in GRANULARITIES:
        col.add(
            data,
            "scale_granularity",
            "$.scale_granularity",
            "unknown scale granularity",
            expected=" | ".join(GRANULARITIES),
            got=type_name(data.get("scale_granularity")),
            value=True,
        )
    params = _scheme_params(col, data)
    axes = data.get("axes")
    if not (isinstance(axes, list) and all(isinstance(a, str) and a.isidentifier() for a in axes)):
        col.add(
            data,
            "axes",
            "$.axes",
            "axes must list names for the logical trailing axes",
            expected="e.g. [rows, cols]",
            got=type_name(axes),
            value=True,
        )
        axes = []
    clash = set(axes) & set(params)
    if clash:
        col.add(data, "axes", "$.axes", f"axis name {sorted(clash)[0]!r} is also a param name", value=True)
    ops_, tensors = _applies_to(col, data, ops)
    symbols = {
        n: sympy.Symbol(n, positive=True, integer=True)
        for n in [*axes, *(k for k, p in params.items() if p.kind == "int")]
    }
    data_part = _part(col, data, "data", "data", DATA_KEYS, params, symbols, data_part=True)
    siblings: list[PartSpec] = []
    raw_sib = data.get("siblings") or {}
    if not isinstance(raw_sib, dict):
        col.add(
            data,
            "siblings",
            "$.siblings",
            "siblings must map a sibling name to its tensor",
            expected="mapping",
            got=type_name(raw_sib),
            value=True,
        )
        raw_sib = {}
    for key in raw_sib:
        part = _part(col, raw_sib, key, f"siblings.{key}", SIBLING_KEYS, params, symbols, data_part=False)
        if part is not None:
            siblings.append(part)
    names = [p.name for p in [data_part, *siblings] if p is not None]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        col.add(data, "siblings", "$.siblings", f"two stored tensors are both named {dup!r}")
    if data_part is not None and not all("{name}" in n or "{module}" in n for n in names):
        col.add(data, "data", "$.data", "every stored name must contain {name} or {module}")
    from_config = _from_config(col, data, params)
    if col.issues or data_part is None:
        return None, col
    scheme = QuantScheme(
        name=path.stem,
        file=str(path),
        doc=" ".join(str(data["doc"]).split()),
        source=" ".join(str(data.get("source", "")).split()),
        element_format=str(data["element_format"]),
        scale_granularity=str(data["scale_granularity"]),
        params=params,
        ops=ops_,
        tensors=tensors,
        axes=tuple(axes),
        data=data_part,
        siblings=tuple(siblings),
        from_config=tuple(from_config),
    )
    return scheme, col


def _scheme_params(col: Collector, data: LocDict) -> dict[str, SchemeParam]:
    out: dict[str, SchemeParam] = {}
    raw = data.get("params") or {}
    if not isinstance(raw, dict):
        col.add(
            data, "params", "$.params", "params must map a name to {kind, default, doc}", got=type_name(raw), value=True
        )
        return out
    for name, entry in raw.items():
        p = f"$.params.{name}"
        if not isinstance(name, str) or not name.isidentifier():
            col.add(raw, name, p, f"param name {name!r} must be an identifier")
            continue
        if not col.keys(entry, p, PARAM_KEYS, ("default",), at=(raw, name)):
            continue
        kind = entry.get("kind", "int")
        default = entry.get("default")
        if kind not in PARAM_KINDS:
            col.add(
                entry, "kind", f"{p}.kind", f"unknown param kind {kind!r}", expected=" | ".join(PARAM_KINDS), value=True
            )
        elif kind == "int" and not (isinstance(default, int) and not isinstance(default, bool)):
            col.add(
                entry,
                "default",
                f"{p}.default",
                "an int param needs an integer default",
                got=type_name(default),
                value=True,
            )
        elif kind == "dtype" and default != CONTEXT and default not in DTYPE_BITS:
            message, hint = unknown_name("dtype", str(default), [*DTYPE_BITS, CONTEXT])
            col.add(entry, "default", f"{p}.default", message, hint=hint, value=True)
        out[name] = SchemeParam(name, kind, default, str(entry.get("doc", "")))
    return out


def _applies_to(col: Collector, data: LocDict, ops: set[str] | None):
    raw = data.get("applies_to")
    if not col.keys(raw, "$.applies_to", APPLIES_KEYS, APPLIES_KEYS, at=(data, "applies_to")):
        return None, None
    out = []
    for key in APPLIES_KEYS:
        value = raw.get(key)
        if value == "all":
            out.append(None)
            continue
        if not _glob_ok(value):
            col.add(
                raw,
                key,
                f"$.applies_to.{key}",
                f"{key} must be a list of names or 'all'",
                got=type_name(value),
                value=True,
            )
            out.append(None)
            continue
        if key == "ops" and ops is not None:
            for i, op in enumerate(value):
                if op not in ops:
                    message, hint = unknown_name("op", op, ops)
                    col.add(value, i, f"$.applies_to.ops[{i}]", message, hint=hint)
        out.append(frozenset(value))
    return out[0], out[1]


def _part(col, parent, key, path, keys, params, symbols, *, data_part: bool) -> PartSpec | None:
    raw = parent.get(key)
    p = f"$.{path}"
    required = ("name", "dtype", "packing", "shape") if data_part else ("name", "dtype", "shape")
    if not col.keys(raw, p, keys, required, at=(parent, key)):
        return None
    ok = True
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        col.add(
            raw, "name", f"{p}.name", "name must be a template such as '{name}_scale'", got=type_name(name), value=True
        )
        ok = False
    dtype = raw.get("dtype")
    if dtype not in DTYPE_BITS and not (dtype in params and params[dtype].kind == "dtype"):
        message, hint = unknown_name(
            "dtype", str(dtype), [*DTYPE_BITS, *(k for k, v in params.items() if v.kind == "dtype")]
        )
        col.add(raw, "dtype", f"{p}.dtype", f"{message} (a safetensors dtype or a dtype param)", hint=hint, value=True)
        ok = False
    packing = raw.get("packing")
    if data_part and not (isinstance(packing, int) and not isinstance(packing, bool) and packing >= 1):
        col.add(
            raw,
            "packing",
            f"{p}.packing",
            "packing is the number of logical elements per stored element",
            expected="integer >= 1",
            got=type_name(packing),
            value=True,
        )
        ok = False
    shape = raw.get("shape")
    if not isinstance(shape, list):
        col.add(
            raw,
            "shape",
            f"{p}.shape",
            "shape must be a list of axes",
            expected="list",
            got=type_name(shape),
            value=True,
        )
        return None
    for i, item in enumerate(shape):
        if item == ELLIPSIS:
            if i != 0:
                col.add(shape, i, f"{p}.shape[{i}]", "'...' (the leading logical axes) may only come first")
                ok = False
            continue
        try:
            parse_dim_expr(item, symbols)
        except ExprSyntaxError as exc:
            col.add(shape, i, f"{p}.shape[{i}]", str(exc), hint=f"use the axes and int params: {', '.join(symbols)}")
            ok = False
    when = raw.get("when")
    if when is not None and not (when in params and params[when].kind == "int"):
        message, hint = unknown_name("int param", str(when), [k for k, v in params.items() if v.kind == "int"])
        col.add(raw, "when", f"{p}.when", message, hint=hint, value=True)
        ok = False
    if not ok:
        return None
    return PartSpec(
        part="data" if data_part else str(key),
        name=name,
        dtype=dtype,
        shape=tuple(shape),
        packing=packing if data_part else None,
        when=when,
        doc=" ".join(str(raw.get("doc", "")).split()),
    )


def _from_config(col: Collector, data: LocDict, params: dict[str, SchemeParam]) -> list[FromConfig]:
    raw = data.get("from_config") or []
    out: list[FromConfig] = []
    if not isinstance(raw, list):
        col.add(
            data,
            "from_config",
            "$.from_config",
            "from_config must be a list of {when, requires, params, ignore}",
            got=type_name(raw),
            value=True,
        )
        return out
    for i, entry in enumerate(raw):
        p = f"$.from_config[{i}]"
        if not col.keys(entry, p, FROM_CONFIG_KEYS, ("when",), at=(raw, i)):
            continue
        when = entry.get("when")
        if not isinstance(when, dict) or not when:
            col.add(
                entry,
                "when",
                f"{p}.when",
                "when maps config paths to the values they must have",
                got=type_name(when),
                value=True,
            )
            continue
        requires = entry.get("requires", [])
        ignore = entry.get("ignore", [])
        for key, value in (("requires", requires), ("ignore", ignore)):
            if not _glob_ok(value):
                col.add(
                    entry, key, f"{p}.{key}", f"{key} must be a list of config paths", got=type_name(value), value=True
                )
        cfg_params = entry.get("params", {})
        if not isinstance(cfg_params, dict):
            col.add(
                entry,
                "params",
                f"{p}.params",
                "params map a scheme param to a config path or a number",
                got=type_name(cfg_params),
                value=True,
            )
            cfg_params = {}
        for k in cfg_params:
            if k not in params:
                message, hint = unknown_name("param", k, params)
                col.add(cfg_params, k, f"{p}.params.{k}", message, hint=hint)
        out.append(FromConfig(dict(when), tuple(requires or ()), dict(cfg_params), tuple(ignore or ())))
    return out


@cache
def default_schemes() -> dict[str, QuantScheme]:
    return load_schemes(QUANT_DIR)


def load_schemes(directory: Path) -> dict[str, QuantScheme]:
    """Every ``*.yaml`` scheme of ``directory``; all issues of all files raised together."""
    from archsql.evaluator.primitives.base import registry

    ops = set(registry())
    out: dict[str, QuantScheme] = {}
    issues: list[Issue] = []
    for path in sorted(Path(directory).glob("*.yaml")):
        scheme, col = parse_scheme(path, ops)
        issues += col.issues
        if scheme is not None:
            out[scheme.name] = scheme
    if NONE not in out and not issues:
        issues.append(Issue(f"the scheme registry needs '{NONE}' (unquantized storage)", file=str(directory)))
    if issues:
        raise SpecError(issues=issues)
    return out


# --------------------------------------------------------------------------- quant_context


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


def _loc(col: Collector, obj: Any, key: Any, path: str) -> Issue:
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
        qc.dtype = _dtype(col, raw, "dtype", f"{path}.dtype")
        qc.dtype_where = _loc(col, raw, "dtype", f"{path}.dtype")
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
            if tensors is not None and not _glob_ok(tensors):
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


def _dtype(col: Collector, obj: Any, key: str, path: str) -> str | None:
    value = obj.get(key)
    if value in DTYPE_BITS:
        return value
    message, hint = unknown_name("dtype", str(value), DTYPE_BITS)
    col.add(obj, key, path, f"{message} (a safetensors dtype)", hint=hint, value=True)
    return None


def _rule(col, obj, key, path, schemes, label) -> Rule | None:
    """``method-name`` or ``{method, dtype, params}`` at ``obj[key]`` (``obj`` itself when key is None)."""
    raw = obj if key is None else obj.get(key)
    where = _loc(col, obj, key, path)
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
        dtype = _dtype(col, raw, "dtype", f"{path}.dtype")
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
    if not _glob_ok(items) or not items:
        col.add(obj, key, path, "expected a module-path glob or a list of them", got=type_name(raw), value=True)
        return []
    out = []
    for i, text in enumerate(items):
        where = _loc(col, raw, i, f"{path}[{i}]") if isinstance(raw, list) else _loc(col, obj, key, path)
        out.append(
            Pattern(text, glob_regex(canonical_name(text)), f"ignore:{text}" if label == "ignore" else label, where)
        )
    return out


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Profile:
    name: str
    file: str
    doc: str
    context: QuantContext


def load_profile(name: str, schemes: Mapping[str, QuantScheme], roles: Mapping[str, Any]) -> Profile:
    files = {p.stem: p for p in sorted(PROFILES_DIR.glob("*.yaml"))}
    if name not in files:
        message, hint = unknown_name("precision profile", name, files)
        raise SpecError(issues=[Issue(message, hint=hint + " (profiles live in archsql/specs/quant/profiles/)")])
    path = files[name]
    data = load_yaml(path)
    col = Collector(str(path))
    qc = QuantContext()
    if col.keys(data, "$", PROFILE_KEYS, PROFILE_KEYS):
        if data.get("profile") != path.stem:
            col.add(
                data,
                "profile",
                "$.profile",
                "profile name must equal the file name",
                expected=path.stem,
                got=type_name(data.get("profile")),
                value=True,
            )
        qc = parse_quant_context(data.get("quant_context"), col, schemes, roles)
        if "from_config" in qc.given:
            col.add(
                data["quant_context"],
                "from_config",
                "$.quant_context.from_config",
                "a profile never reads the checkpoint's config (it describes a deployment)",
            )
    if col.issues:
        raise SpecError(issues=col.issues)
    return Profile(name, str(path), " ".join(str(data.get("doc", "")).split()), qc)


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


# --------------------------------------------------------------------------- checkpoint config


def config_path_value(doc: Any, path: str) -> tuple[bool, Any]:
    """(present, value) of a dotted path (list items by index) in a JSON document."""
    value = doc
    for part in str(path).split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def quant_document(config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None) -> tuple[dict | None, str]:
    """The checkpoint's quantization description and where it came from: a ModelOpt
    ``hf_quant_config.json`` (its ``quantization`` object, quant_method 'modelopt') wins over
    ``config.quantization_config``; a config without quant_method from the ModelOpt producer
    is read as quant_method 'modelopt'."""
    if hf_quant_config is not None and isinstance(hf_quant_config.get("quantization"), Mapping):
        doc = dict(hf_quant_config["quantization"])
        doc.setdefault("quant_method", "modelopt")
        return doc, "hf_quant_config.json"
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping):
        return None, ""
    doc = dict(qc)
    producer = doc.get("producer")
    if "quant_method" not in doc and isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        doc["quant_method"] = "modelopt"
    return doc, "config.json quantization_config"


def _matches(entry: FromConfig, doc: Mapping[str, Any]) -> bool:
    for path, want in entry.when.items():
        present, value = config_path_value(doc, path)
        accepted = want if isinstance(want, list) else [want]
        if not present or not any(value == a and type(value) is type(a) for a in accepted):
            return False
    return all(config_path_value(doc, p)[0] for p in entry.requires)


def rules_from_config(
    doc: Mapping[str, Any], source: str, schemes: Mapping[str, QuantScheme], file: str
) -> tuple[Rule | None, list[str], list[Issue]]:
    """The scheme a quantization document selects (the first matching entry of each scheme;
    two schemes matching is ambiguous), its params, and the module patterns it keeps
    unquantized."""
    hits = []
    for scheme in schemes.values():
        entry = next((e for e in scheme.from_config if _matches(e, doc)), None)
        if entry is not None:
            hits.append((scheme, entry))
    method = doc.get("quant_method", doc.get("quant_algo"))
    if not hits:
        known = sorted({str(e.when) for s in schemes.values() for e in s.from_config})
        return (
            None,
            [],
            [
                Issue(
                    f"the checkpoint's quantization ({source}: quant_method {method!r}) matches no quant scheme",
                    file=file,
                    hint="add a scheme YAML with a from_config entry under archsql/specs/quant/, or set "
                    f"quant_context.from_config: false and write the rules; known: {'; '.join(known[:6])}",
                )
            ],
        )
    if len(hits) > 1:
        names = ", ".join(s.name for s, _ in hits)
        return (
            None,
            [],
            [
                Issue(
                    f"the checkpoint's quantization ({source}) matches several schemes: {names}",
                    file=file,
                    hint="make the schemes' from_config conditions exclusive",
                )
            ],
        )
    scheme, entry = hits[0]
    params: dict[str, Any] = {}
    issues: list[Issue] = []
    for name, ref in entry.params.items():
        if isinstance(ref, int) and not isinstance(ref, bool):
            params[name] = ref
            continue
        present, value = config_path_value(doc, ref)
        if not present:
            issues.append(Issue(f"{source}: '{ref}' (scheme {scheme.name} param {name}) is missing", file=file))
        else:
            params[name] = value
    ignore: list[str] = []
    for path in entry.ignore:
        present, value = config_path_value(doc, path)
        if present and value is not None:
            if _glob_ok(value):
                ignore.extend(value)
            else:
                issues.append(
                    Issue(f"{source}: '{path}' must be a list of module names", file=file, got=type_name(value))
                )
    label = f"default (from {source})"
    return Rule(scheme.name, params, None, label, None), ignore, issues


def config_dtype(config: Mapping[str, Any]) -> str | None:
    """The checkpoint's dtype: ``torch_dtype`` (``dtype`` in transformers >= 4.56), else the
    language model's under ``text_config`` (multimodal configs)."""
    for cfg in (config, config.get("text_config")):
        if isinstance(cfg, Mapping):
            value = cfg.get("torch_dtype", cfg.get("dtype"))
            if value is not None:
                return TORCH_DTYPES.get(str(value))
    return None


def read_hf_quant_config(config_file: Path) -> dict | None:
    """``hf_quant_config/<config file name>`` next to the config snapshot, when there is one."""
    path = config_file.parent / "hf_quant_config" / config_file.name
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(issues=[Issue(f"cannot read hf_quant_config.json: {exc}", file=str(path))]) from None


# --------------------------------------------------------------------------- checkpoint name prefixes


@cache
def checkpoint_prefixes() -> tuple[tuple[str, str, str], ...]:
    """(prefix, canonical, description), longest prefix first (``checkpoint_prefixes.yaml``)."""
    data = load_yaml(PREFIXES_FILE)
    col = Collector(str(PREFIXES_FILE))
    out = []
    if col.keys(data, "$", data.keys() if isinstance(data, dict) else (), what="prefix"):
        for prefix, entry in data.items():
            p = f"$[{prefix!r}]"
            if col.keys(entry, p, ("canonical", "doc"), ("canonical",), at=(data, prefix)):
                canonical = entry.get("canonical")
                if not (
                    isinstance(prefix, str)
                    and isinstance(canonical, str)
                    and prefix.endswith(".")
                    and canonical.endswith(".")
                ):
                    col.add(
                        data,
                        prefix,
                        p,
                        "a prefix and its canonical form end with '.'",
                        got=f"{prefix!r} → {canonical!r}",
                    )
                    continue
                out.append((prefix, canonical, " ".join(str(entry.get("doc", "")).split())))
    if col.issues:
        raise SpecError(issues=col.issues)
    return tuple(sorted(out, key=lambda r: -len(r[0])))


def canonical_name(name: str) -> str:
    """A checkpoint-style name with its (longest) multimodal wrapper prefix normalized."""
    for prefix, canonical, _ in checkpoint_prefixes():
        if name.startswith(prefix):
            return canonical + name[len(prefix) :]
    return name


# --------------------------------------------------------------------------- buffers


@dataclass(frozen=True)
class Buffer:
    """A non-parameter tensor saved in the checkpoint (a persistent buffer)."""

    name: str  # checkpoint name template ({layer} allowed when the node is in a stack)
    node: str  # uid (or model graph node name) whose copies it follows
    shape: tuple[Any, ...]  # dim expressions
    dtype: str
    where: Issue
    doc: str = ""


def parse_buffers(raw: Any, col: Collector, path: str = "$.buffers") -> list[Buffer]:
    out: list[Buffer] = []
    if raw is None:
        return out
    if not isinstance(raw, dict):
        col.add(raw, None, path, "buffers map a checkpoint tensor name to {node, shape, dtype}", got=type_name(raw))
        return out
    for name, entry in raw.items():
        p = f"{path}[{name!r}]"
        if not col.keys(entry, p, BUFFER_KEYS, ("node", "shape", "dtype"), at=(raw, name)):
            continue
        dtype = _dtype(col, entry, "dtype", f"{p}.dtype")
        shape = entry.get("shape")
        if not isinstance(shape, list):
            col.add(
                entry,
                "shape",
                f"{p}.shape",
                "shape must be a list of dim expressions",
                got=type_name(shape),
                value=True,
            )
            continue
        node = entry.get("node")
        if not isinstance(node, str):
            col.add(
                entry,
                "node",
                f"{p}.node",
                "node names the graph node (or uid) the buffer belongs to",
                got=type_name(node),
                value=True,
            )
            continue
        if dtype is not None:
            out.append(
                Buffer(
                    str(name),
                    node,
                    tuple(shape),
                    dtype,
                    _loc(col, raw, name, p),
                    " ".join(str(entry.get("doc", "")).split()),
                )
            )
    return out


def matches(regex: re.Pattern, module: str, full: str) -> bool:
    return regex.fullmatch(module) is not None or regex.fullmatch(full) is not None


def suggest(name: str, choices) -> str | None:
    return did_you_mean(name, choices)


# --------------------------------------------------------------------------- store defaults


def storage_dtypes_table():
    """The ``storage_dtypes`` parameter table: bits of every safetensors dtype."""
    import pyarrow as pa

    from archsql.schema.tables import PARAMETER_TABLES

    rows = [
        {
            "dtype": d,
            "bits": b,
            "description": dtype_description(d),
        }
        for d, b in DTYPE_BITS.items()
    ]
    return pa.Table.from_pylist(rows, schema=PARAMETER_TABLES["storage_dtypes"])


def checkpoint_prefixes_table():
    """The ``checkpoint_prefixes`` parameter table (``specs/checkpoint_prefixes.yaml``)."""
    import pyarrow as pa

    from archsql.schema.tables import PARAMETER_TABLES

    rows = [{"prefix": p, "canonical": c, "description": d} for p, c, d in checkpoint_prefixes()]
    return pa.Table.from_pylist(rows, schema=PARAMETER_TABLES["checkpoint_prefixes"])
