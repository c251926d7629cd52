"""bind_storage: the on-disk form of every weight tensor, decided once per model (and per
precision profile) from the spec's ``quant_context``, the checkpoint's own quantization
config and the quant schemes of ``archsql/specs/quant/``.

The pass reads the evaluated ``weights``/``nodes``/``layer_schedule`` tables and writes
``storage_tensors``: one row per stored tensor template — the data part of a logical
weight and each sibling (scales, zero points, group indices), plus declared buffers —
with its name template, dtype and shape, the scheme and the rule that chose it, and the
layers it covers (rules may differ per layer: ``ignore: [model.layers.0.*]``).  Bytes,
totals and reconciliation against a checkpoint are views.

Rule problems that do not stop the evaluation — a pattern that matches no tensor, a shape
formula that is not a whole number, no storage dtype — are returned as issues for the
packing guard of :func:`archsql.publish_check.validate`; a malformed ``quant_context`` or
``buffers`` key is a :class:`~archsql.errors.SpecError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import sympy

from archsql.errors import Issue, SpecError, did_you_mean
from archsql.schema.checks import Collector
from archsql.schema.expr import ExprSyntaxError, parse_dim_expr
from archsql.schema.quant import (
    NONE,
    FormulaError,
    Pattern,
    QuantContext,
    Rule,
    canonical_name,
    config_dtype,
    default_schemes,
    glob_regex,
    load_profile,
    matches,
    parse_buffers,
    parse_quant_context,
    quant_document,
    read_hf_quant_config,
    rules_from_config,
)
from archsql.schema.tables import PHASES, TABLES

NATIVE = "native"  # the profile name of the checkpoint's own storage (the spec's quant_context)
DATA = "data"
BUFFER = "buffer"


@dataclass
class StorageBinding:
    table: pa.Table  # storage_tensors rows
    issues: list[Issue]  # packing-guard problems
    context: QuantContext


def bind_storage(analysis, library=None, *, profile: str | None = None, config: dict | None = None) -> StorageBinding:
    """The ``storage_tensors`` rows of an evaluated model (``profile``: a precision profile of
    ``archsql/specs/quant/profiles/`` instead of the checkpoint's own storage)."""
    from archsql.evaluator.bind import config_path, load_config
    from archsql.specs import default_library

    library = library or default_library()
    spec = analysis.walks[PHASES[0]].program.model
    schemes = default_schemes()
    col = Collector(spec.file)
    qc = parse_quant_context(getattr(spec, "quant_context", None), col, schemes, library.roles)
    buffers = parse_buffers(getattr(spec, "buffers", None), col)
    cfg_file = config_path(spec, library.configs_dir)
    if config is None:
        config = load_config(spec, library.configs_dir, col)
    if col.issues:
        raise SpecError(issues=col.issues)
    issues: list[Issue] = []
    label = NATIVE
    if profile is not None and profile != NATIVE:
        qc = qc.merged(load_profile(profile, schemes, library.roles).context)
        label = profile
    if qc.from_config:
        doc, source = quant_document(config, read_hf_quant_config(Path(cfg_file)))
        if doc is not None:
            rule, ignore, found = rules_from_config(doc, source, schemes, str(cfg_file))
            issues += found
            if rule is not None and qc.default is None:
                qc.default = rule
            where = Issue("", file=str(cfg_file))
            qc.ignore = [*qc.ignore, *(Pattern(t, glob_regex(canonical_name(t)), f"ignore:{t}", where) for t in ignore)]
    dtype = qc.dtype or config_dtype(config)
    if dtype is None:
        issues.append(
            Issue(
                "no storage dtype for unquantized tensors: the config has no torch_dtype",
                file=spec.file,
                path="$.quant_context.dtype",
                hint="write quant_context: { dtype: BF16 } (the dtype the checkpoint stores)",
            )
        )
    rows, names = _weight_rows(analysis, spec.name, label, qc, schemes, dtype, issues)
    rows += _buffer_rows(analysis, spec, label, buffers)
    issues += _unmatched(qc, names)
    table = pa.Table.from_pylist(rows, schema=TABLES["storage_tensors"])
    return StorageBinding(table, issues, qc)


def _nodes(tables) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in tables["nodes"].select(["uid", "op", "role", "path", "stack", "template"]).to_pylist():
        out.setdefault(row["uid"], row)
    return out


def _schedule(tables) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for row in tables["layer_schedule"].to_pylist():
        out.setdefault((row["stack"], row["template"]), []).append(int(row["layer"]))
    return out


def _layers(node: dict[str, Any], schedule) -> list[int] | None:
    if node["stack"] is None:
        return None
    return sorted(schedule.get((node["stack"], node["template"]), []))


def _resolve(qc: QuantContext, role: str | None, tensor: str, module: str, full: str) -> Rule:
    for ov in qc.overrides:
        if ov.tensors is not None and tensor not in ov.tensors:
            continue
        if any(matches(p.regex, module, full) for p in ov.patterns):
            return ov.rule
    for pat in qc.ignore:
        if matches(pat.regex, module, full):
            return Rule(NONE, label=pat.label)
    if role in qc.roles:
        return qc.roles[role]
    if qc.default is not None:
        return qc.default
    return Rule(NONE, label="default")


def _weight_rows(analysis, model, profile, qc, schemes, dtype, issues) -> tuple[list[dict], set[tuple[str, str]]]:
    tables = analysis.tables
    nodes = _nodes(tables)
    schedule = _schedule(tables)
    counts = dict(zip(tables["instances"]["uid"].to_pylist(), tables["instances"]["count"].to_pylist(), strict=True))
    rows: list[dict] = []
    names: set[tuple[str, str]] = set()  # (module, full name) of every concrete tensor, for unmatched patterns
    reported: set[tuple[str, str]] = set()
    for w in tables["weights"].to_pylist():
        node = nodes[w["uid"]]
        tensor, name, shape = w["tensor"], w["name"], list(w["shape"])
        module = name[: -len(tensor) - 1] if name.endswith("." + tensor) else name
        layers = _layers(node, schedule)
        copies = counts.get(w["uid"], 1) // max(1, len(layers or [1]))
        stacked = copies > 1 and "{expert}" not in name
        if stacked:  # stacked experts: one tensor per layer, [copies, *shape]
            shape = [copies, *shape]
        groups: dict[tuple, tuple[Rule, list[int]]] = {}
        for layer in layers if layers is not None else [None]:
            concrete = module if layer is None else module.replace("{layer}", str(layer))
            cmod = canonical_name(concrete)
            cfull = f"{cmod}.{tensor}"
            names.add((cmod, cfull))
            rule = _resolve(qc, node["role"], tensor, cmod, cfull)
            key = (rule.method, tuple(sorted(rule.params.items())), rule.dtype, rule.label)
            groups.setdefault(key, (rule, []))[1].append(layer)
        for rule, group_layers in groups.values():
            scheme = schemes[rule.method]
            label = rule.label
            if not scheme.applies(node["op"], tensor, len(shape)):
                if rule.label.startswith("override:") and (rule.label, w["uid"]) not in reported:
                    reported.add((rule.label, w["uid"]))
                    issues.append(
                        _at(
                            rule.where,
                            f"{rule.label} stores '{name}' (op {node['op']}) as {rule.method}, "
                            f"which applies to ops {sorted(scheme.ops or [])} tensors {sorted(scheme.tensors or [])}",
                            hint="narrow the override's match/tensors, or use dtype: for unquantized tensors",
                        )
                    )
                label = f"{rule.label} → none: {rule.method} skips {node['op']}.{tensor}"
                scheme, rule = schemes[NONE], Rule(NONE)
            given = dict(rule.params)
            if rule.dtype is not None:
                given["dtype"] = rule.dtype
            params = scheme.bind_params(given, dtype)
            try:
                stored = scheme.stored(name, module, shape, params)
                sources = scheme.axis_sources(len(shape), params)
            except FormulaError as exc:
                issues.append(
                    Issue(f"{name}: {exc}", file=rule.where.file if rule.where else None, path=f"uid {w['uid']}")
                )
                continue
            for part, stored_name, part_dtype, part_shape, packing in stored:
                rows.append(
                    {
                        "model": model,
                        "profile": profile,
                        "uid": w["uid"],
                        "tensor": tensor,
                        "part": part,
                        "name": stored_name,
                        "layers": None if group_layers == [None] else group_layers,
                        "scheme": scheme.name,
                        "rule": label,
                        "dtype": part_dtype,
                        "shape": part_shape,
                        "packing": packing,
                        "axis_map": _axis_map(sources[part], stacked),
                    }
                )
    return rows, names


def _axis_map(sources: list[tuple[int | None, int]], stacked: bool) -> list[dict[str, int | None]]:
    """Stored axis → the weight axis it follows (weights.shape index; -1 the stacked copies
    axis; null none) and its divisor: stored size = ceil(weight axis size / divisor)."""
    shift = 1 if stacked else 0
    return [{"axis": None if a is None else a - shift, "divisor": d} for a, d in sources]


def _buffer_rows(analysis, spec, profile, buffers) -> list[dict]:
    if not buffers:
        return []
    tables = analysis.tables
    nodes = _nodes(tables)
    schedule = _schedule(tables)
    symbols = {k: sympy.Integer(v) for k, v in analysis.dims.items()}
    rows: list[dict] = []
    issues: list[Issue] = []
    for buf in buffers:
        node = nodes.get(buf.node)
        if node is None:
            from archsql.errors import unknown_name

            message, hint = unknown_name("node", buf.node, nodes)
            issues.append(_at(buf.where, f"buffer '{buf.name}' belongs to {message}", hint=hint))
            continue
        shape = []
        for item in buf.shape:
            try:
                value = parse_dim_expr(item, symbols)
            except ExprSyntaxError as exc:
                issues.append(_at(buf.where, f"buffer '{buf.name}' shape: {exc}", hint="use dims the model binds"))
                break
            shape.append(int(value))
        else:
            layers = _layers(node, schedule) if "{layer}" in buf.name else None
            rows.append(
                {
                    "model": spec.name,
                    "profile": profile,
                    "uid": buf.node,
                    "tensor": buf.name.rsplit(".", 1)[-1],
                    "part": BUFFER,
                    "name": buf.name,
                    "layers": layers,
                    "scheme": NONE,
                    "rule": BUFFER,
                    "dtype": buf.dtype,
                    "shape": shape,
                    "packing": None,
                    "axis_map": [{"axis": None, "divisor": 1} for _ in shape],
                }
            )
    if issues:
        raise SpecError(issues=issues)
    return rows


def _unmatched(qc: QuantContext, names: set[tuple[str, str]]) -> list[Issue]:
    """Overrides and ignore patterns that match no tensor of the model."""
    out = []
    patterns = [*(p for ov in qc.overrides for p in ov.patterns), *qc.ignore]
    candidates: set[str] | None = None
    for pat in patterns:
        if any(matches(pat.regex, m, f) for m, f in names):
            continue
        if candidates is None:  # module paths, their enclosing modules, with layer numbers as '*'
            candidates = set()
            for _module, full in names:
                parts = full.split(".")
                for i in range(1, len(parts) + 1):
                    candidates.add(".".join(parts[:i]))
                    candidates.add(".".join("*" if p.isdigit() else p for p in parts[:i]))
        close = did_you_mean(canonical_name(pat.text), candidates)
        out.append(
            _at(
                pat.where,
                f"{pat.label}: pattern '{pat.text}' matches no tensor of the model",
                hint=close or "patterns match a module path, an enclosing module or a trailing part of one",
            )
        )
    return out


def _at(where: Issue | None, message: str, **kw) -> Issue:
    if where is None:
        return Issue(message, **kw)
    return Issue(message, file=where.file, line=where.line, column=where.column, path=where.path, **kw)
