"""``weight_axes``: how each axis of a node's weight may be split across a parallel group.

One entry per axis of the node's main weight, in the weight's axis order:
``{replicated: true}`` or ``{world: GROUP, parts: DIM_EXPR, fit: RULE}`` — the axis is cut
into ``parts`` whole pieces (e.g. heads) spread over the group.  The dims table says which
groups may split which dims; this check keeps specs honest until layouts (deployments)
read these entries.
"""

from __future__ import annotations

from typing import Any

import sympy

from archsql.errors import Issue, did_you_mean
from archsql.schema.checks import type_name
from archsql.schema.expr import ExprSyntaxError, expr_names, parse_dim_expr

ENTRY_KEYS = ("replicated", "world", "parts", "fit")
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
            if "world" in entry or "parts" in entry:
                issues.append(issue("an axis is either replicated or split, not both", p))
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
