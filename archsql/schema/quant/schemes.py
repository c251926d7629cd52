"""Quant schemes (``archsql/specs/quant/*.yaml``): one on-disk form of a logical weight —
storage dtype, packing, stored tensor names, sibling tensors with shape formulas, and how a
checkpoint's quantization config selects it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import sympy

from archsql.dtypes import DTYPE_BITS
from archsql.errors import Issue, SpecError, unknown_name
from archsql.schema.checks import Collector, type_name
from archsql.schema.expr import ExprSyntaxError, parse_dim_expr
from archsql.schema.ops import known_ops
from archsql.schema.yamlsrc import LocDict, load_yaml

SPECS_DIR = Path(__file__).parents[2] / "specs"
QUANT_DIR = SPECS_DIR / "quant"
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


class FormulaError(ValueError):
    """A shape formula that does not give a positive whole number for a tensor."""


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


def glob_ok(obj: Any) -> bool:
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
        if not glob_ok(value):
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
            if not glob_ok(value):
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
    ops = set(known_ops())
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
