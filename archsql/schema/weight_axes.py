"""``weight_axes``: how each axis of a node's weight may be split across a parallel group.

One entry per axis of the node's main weight, in the weight's axis order:
``{replicated: true}`` or ``{world: GROUP, parts: DIM_EXPR, fit: RULE}`` — the axis is cut
into ``parts`` whole pieces (e.g. heads) spread over the group — or, for a fused projection
whose output is several tensors side by side (Mamba2's in_proj = z | x | B | C | dt),
``{world: GROUP, fused: [{size: DIM_EXPR, parts: DIM_EXPR}, ...]}``: each segment, in order,
is cut into its own whole pieces and every device holds its share of each (x by heads, B
and C by groups), never a blind cut of the fused axis.  The dims table says which groups may
split which dims; layouts (archsql.evaluator.layouts) read these entries.
"""

from __future__ import annotations

from typing import Any

import sympy

from archsql.errors import Issue, did_you_mean
from archsql.schema.checks import type_name
from archsql.schema.expr import ExprSyntaxError, expr_names, parse_dim_expr

ENTRY_KEYS = ("replicated", "world", "parts", "fused", "fit")
SEGMENT_KEYS = ("size", "parts")
FIT_RULES = ("exact", "pad", "replica_cells")


def parallel_groups(dims_table: dict[str, dict]) -> set[str]:
    return {g for entry in dims_table.values() for g in entry.get("shardable_by", [])}


def check_weight_axes(node, axes: list, dims_table: dict[str, dict], symbols: dict, binding: dict) -> list[Issue]:
    """Issues for a node declaration's ``weight_axes`` against its main weight ``axes``."""
    raw: Any = node.weight_axes
    where = node.weight_axes_where or node.where
    path = where.path

    def issue(message: str, at: str | None = None, **kw) -> Issue:
        return Issue(message, file=where.file, line=where.line, column=where.column, path=at or path, **kw)

    if raw is None:
        return []
    if not axes:
        return [
            issue(
                f"node '{node.name}' ({node.op}) has no weight, so it takes no weight_axes", hint="remove weight_axes"
            )
        ]
    if len(raw) != len(axes):
        return [
            issue(
                "weight_axes needs one entry per weight axis",
                expected=f"{len(axes)} entries ([{', '.join(a.label for a in axes)}])",
                got=f"{len(raw)} entries",
            )
        ]
    groups = parallel_groups(dims_table)
    issues: list[Issue] = []
    for i, (entry, axis) in enumerate(zip(raw, axes, strict=True)):
        p = f"{path}[{i}]"
        if not isinstance(entry, dict):
            issues.append(
                issue(
                    "expected a mapping", p, expected="{replicated: true} or {world, parts, fit}", got=type_name(entry)
                )
            )
            continue
        unknown = [k for k in entry if k not in ENTRY_KEYS]
        for k in unknown:
            issues.append(
                issue(f"unknown key '{k}'", p, hint=did_you_mean(k, ENTRY_KEYS) or f"allowed: {', '.join(ENTRY_KEYS)}")
            )
        if entry.get("replicated") is True:
            if "world" in entry or "parts" in entry or "fused" in entry:
                issues.append(issue("an axis is either replicated or split, not both", p))
            continue
        if "fused" in entry:
            issues += _check_fused(entry, axis, p, issue, dims_table, groups, symbols, binding)
            continue
        world, parts = entry.get("world"), entry.get("parts")
        if world not in groups:
            issues.append(
                issue(
                    f"unknown parallel group {world!r}",
                    p,
                    hint=did_you_mean(str(world), groups) or f"groups: {', '.join(sorted(groups))}",
                )
            )
            continue
        fit = entry.get("fit", "exact")
        if fit not in FIT_RULES:
            issues.append(issue(f"unknown fit rule {fit!r}", p, expected=" | ".join(FIT_RULES), got=str(fit)))
        try:
            parts_expr = parse_dim_expr(parts, symbols)
        except ExprSyntaxError as exc:
            issues.append(issue(str(exc), f"{p}.parts"))
            continue
        for name in sorted(expr_names(str(parts))):
            if name in dims_table and world not in dims_table[name].get("shardable_by", []):
                issues.append(
                    issue(
                        f"dim '{name}' may not be split by group '{world}'",
                        p,
                        hint=f"archsql/specs/dims.yaml lists shardable_by {dims_table[name].get('shardable_by', [])} for {name}; replicate this axis or use another group",
                    )
                )
        n = sympy.sympify(parts_expr.xreplace(binding))
        if n.is_Integer and axis.value.is_Integer and int(axis.value) % int(n) != 0:
            issues.append(issue(f"axis {axis.label}={axis.value} does not split into {parts}={n} whole parts", p))
    return issues


def _check_fused(entry: dict, axis, p: str, issue, dims_table, groups, symbols, binding) -> list[Issue]:
    """A fused axis: ``fused`` lists its segments in order, each {size, parts}; the sizes add
    up to the axis and each splits into its parts."""
    world, fused = entry.get("world"), entry["fused"]
    if "parts" in entry:
        return [issue("a fused axis gives parts per segment, not for the whole axis", p, hint="remove parts:")]
    if world not in groups:
        hint = did_you_mean(str(world), groups) or f"groups: {', '.join(sorted(groups))}"
        return [issue(f"unknown parallel group {world!r}", p, hint=hint)]
    if not isinstance(fused, list) or len(fused) < 2:
        return [
            issue(
                "fused needs the segments of the axis, in order",
                f"{p}.fused",
                expected="a list of two or more {size, parts}",
                got=type_name(fused) if not isinstance(fused, list) else f"{len(fused)} segments",
            )
        ]
    issues: list[Issue] = []
    sizes: list[sympy.Expr] = []
    for j, seg in enumerate(fused):
        at = f"{p}.fused[{j}]"
        if not isinstance(seg, dict) or set(seg) != set(SEGMENT_KEYS):
            issues.append(
                issue("a segment is {size, parts}", at, expected="size: DIM_EXPR, parts: DIM_EXPR", got=str(seg))
            )
            continue
        try:
            size = parse_dim_expr(seg["size"], symbols)
            parts = parse_dim_expr(seg["parts"], symbols)
        except ExprSyntaxError as exc:
            issues.append(issue(str(exc), at))
            continue
        for name in sorted(expr_names(str(seg["parts"]))):
            if name in dims_table and world not in dims_table[name].get("shardable_by", []):
                issues.append(
                    issue(
                        f"dim '{name}' may not be split by group '{world}'",
                        at,
                        hint=f"archsql/specs/dims.yaml lists shardable_by {dims_table[name].get('shardable_by', [])} for {name}",
                    )
                )
        s, n = sympy.sympify(size.xreplace(binding)), sympy.sympify(parts.xreplace(binding))
        sizes.append(s)
        if s.is_Integer and n.is_Integer and (int(n) < 1 or int(s) % int(n) != 0):
            issues.append(
                issue(f"segment size {seg['size']}={s} does not split into {seg['parts']}={n} whole parts", at)
            )
    total = sympy.Add(*sizes)
    if not issues and total.is_Integer and axis.value.is_Integer and total != axis.value:
        issues.append(
            issue(
                "the fused segments must add up to the axis",
                f"{p}.fused",
                expected=f"{axis.label} = {axis.value}",
                got=" + ".join(str(s) for s in sizes) + f" = {total}",
            )
        )
    return issues
