"""Graph diff: two components or two models, nodes paired by declaration path.

A component's nodes are paired by their graph key (``$.graph.<name>``); a model's by uid —
the declaration path ``stack/template/slot.node`` of the expanded graph
(:func:`archsql.evaluator.evaluate`), so the same leaf name in two layer groups is two
nodes.  Every changed attribute is one row (op, inputs, each dim, weight_axes, checkpoint
path, role, component, caches; for models also the bound output shape, weight shapes and
copies from the evaluated tables, and the model's dims, layer schedules and slot fills);
a path on one side only is one row.  The result is an Arrow table; ``render`` prints it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql.errors import DesignError, Issue, did_you_mean

DIFF_SCHEMA = pa.schema(
    [
        ("a", pa.string()),
        ("b", pa.string()),
        ("kind", pa.string()),  # component | model
        ("phase", pa.string()),
        ("path", pa.string()),  # declaration path: graph key, uid, or $.<top-level key>
        ("status", pa.string()),  # only_a | only_b | changed
        ("attribute", pa.string()),  # null for a one-sided path
        ("a_value", pa.string()),
        ("b_value", pa.string()),
    ]
)
STATUSES = ("only_a", "only_b", "changed")


@dataclass(frozen=True)
class GraphDiff:
    a: str
    b: str
    kind: str
    phase: str
    table: pa.Table

    def rows(self, status: str | None = None) -> list[dict[str, Any]]:
        rows = self.table.to_pylist()
        return [r for r in rows if status is None or r["status"] == status]

    def paths(self, status: str) -> list[str]:
        return list(dict.fromkeys(r["path"] for r in self.rows(status)))

    def to_polars(self):
        import polars as pl

        return pl.from_arrow(self.table)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        return "[" + ", ".join(map(str, value)) + "]"
    return json.dumps(value, separators=(", ", ": "), default=str)


def _cache_text(entries) -> str | None:
    parts = []
    for family, e in entries:
        law = e.growth
        for param in ("window", "ratio", "chunk"):
            if getattr(e, param, None) is not None:
                law += f"({param}={getattr(e, param)})"
        parts.append(f"{family}.{e.kind}: {law}")
    return "; ".join(parts) or None


def _node_attrs(op, slot, inputs, dims, weight_axes, path, role, caches) -> dict[str, str | None]:
    attrs: dict[str, str | None] = {
        "op": op if op is not None else (f"slot:{slot}" if slot else None),
        "in": ", ".join(inputs) if inputs else None,
        "path": path,
        "role": role,
        "weight_axes": _text(weight_axes),
        "cache": _cache_text(caches),
    }
    for key, value in sorted((dims or {}).items()):
        attrs[f"dims.{key}"] = _text(value)
    return attrs


def _summary(attrs: dict[str, str | None]) -> str:
    keys = ("op", "in", "dims", "cache")
    if "op" not in attrs:  # not a node: a dim, a schedule, a template, a cache entry
        return "; ".join(f"{k}={v}" for k, v in attrs.items() if v is not None)
    parts = []
    for key in keys:
        if key == "dims":
            dims = {k[5:]: v for k, v in attrs.items() if k.startswith("dims.") and v is not None}
            if dims:
                parts.append("dims={" + ", ".join(f"{k}: {v}" for k, v in dims.items()) + "}")
        elif attrs.get(key):
            parts.append(f"{key}={attrs[key]}")
    return "; ".join(parts)


def _pair(
    a_nodes: dict[str, dict[str, str | None]], b_nodes: dict[str, dict[str, str | None]]
) -> list[tuple[str, str, str | None, str | None, str | None]]:
    """(path, status, attribute, a_value, b_value) rows, in A's order with B-only paths at
    their place in B's order."""
    order: list[str] = list(a_nodes)
    for i, path in enumerate(b_nodes):
        if path not in a_nodes:
            before = list(b_nodes)[:i]
            anchor = max((order.index(p) for p in before if p in order), default=-1)
            order.insert(anchor + 1, path)
    rows = []
    for path in order:
        a, b = a_nodes.get(path), b_nodes.get(path)
        if a is None:
            rows.append((path, "only_b", None, None, _summary(b)))
        elif b is None:
            rows.append((path, "only_a", None, _summary(a), None))
        else:
            for attr in dict.fromkeys([*a, *b]):
                if a.get(attr) != b.get(attr):
                    rows.append((path, "changed", attr, a.get(attr), b.get(attr)))
    return rows


# ---------------------------------------------------------------------------- components


def _component_nodes(comp, library) -> dict[str, dict[str, str | None]]:
    caches: dict[str, list] = {}
    for entry in comp.cache:
        caches.setdefault(entry.node, []).append((comp.cache_family or "kv", entry))
    out: dict[str, dict[str, str | None]] = {
        "$": {
            "role": comp.role,
            "inputs": ", ".join(comp.inputs),
            "outputs": ", ".join(comp.outputs),
            "decode_variant": comp.decode_variant,
            "cache.family": comp.cache_family,
            "slots": _text(comp.slots) if comp.slots else None,
        }
    }
    for name, node in comp.graph.items():
        out[name] = _node_attrs(
            node.op, node.slot, node.inputs, node.dims, node.weight_axes, node.path, node.role, caches.get(name, [])
        )
    for e in comp.cache:
        out[f"$.cache.{e.node}:{e.kind}"] = {"entry": _cache_text([(comp.cache_family or "kv", e)])}
    return out


def diff_components(a: str, b: str, *, phase: str = "prefill", library=None) -> GraphDiff:
    """Diff two library components (in ``decode``: their decode variants, when they have one)."""
    from archsql.specs import default_library

    library = library or default_library()
    comps = []
    for name in (a, b):
        if name not in library.component_files:
            raise _unknown(name, library)
        comp = library.component(name)
        if phase == "decode" and comp.decode_variant:
            comp = library.component(comp.decode_variant)
        comps.append(comp)
    rows = _pair(_component_nodes(comps[0], library), _component_nodes(comps[1], library))
    return _table(comps[0].name, comps[1].name, "component", phase, rows)


# ---------------------------------------------------------------------------- models


def _shape_texts(analysis, phase: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for row in analysis.tables["shapes"].to_pylist():
        if row["phase"] == phase:
            out.setdefault(row["uid"], []).append(row["symbol"] or str(row["size"]))
    return {uid: "[" + ", ".join(axes) + "]" for uid, axes in out.items()}


def _weight_texts(analysis) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for row in analysis.tables["weights"].to_pylist():
        out.setdefault(row["uid"], []).append(f"{row['tensor']}{list(row['shape'])}")
    return {uid: ", ".join(parts) for uid, parts in out.items()}


def _model_nodes(analysis, phase: str) -> dict[str, dict[str, str | None]]:
    program = analysis.walks[phase].program
    spec = program.model
    out: dict[str, dict[str, str | None]] = {}
    for dim, value in sorted(analysis.dims.items()):
        out[f"$.dims.{dim}"] = {"value": str(value), "binding": str(spec.dims.get(dim))}
    for name, st in program.stacks.items():
        runs: list[list] = []
        for t in st.schedule:
            if runs and runs[-1][0] == t:
                runs[-1][1] += 1
            else:
                runs.append([t, 1])
        out[f"$.stacks.{name}.schedule"] = {"templates": ",".join(f"{t}×{n}" for t, n in runs)}
    for t in spec.templates:
        fills = {**spec.components, **spec.templates[t]}
        out[f"$.templates.{t}"] = {f"fill.{slot}": f.component for slot, f in sorted(fills.items())}
        if spec.template_dims.get(t):
            out[f"$.templates.{t}"]["dims"] = _text(spec.template_dims[t])
    shapes = _shape_texts(analysis, phase)
    weights = _weight_texts(analysis)
    copies = {r["uid"]: str(r["count"]) for r in analysis.tables["instances"].to_pylist()}
    for node in program.nodes:
        inputs = [r.name if r.kind != "stream" else f"{r.name}.{r.stream}" for r in node.inputs]
        attrs = _node_attrs(
            node.op,
            None,
            inputs,
            node.dims,
            node.spec.weight_axes if node.spec else None,
            node.path,
            node.role,
            node.cache,
        )
        attrs["component"] = node.component
        attrs["shape"] = shapes.get(node.uid)
        attrs["weights"] = weights.get(node.uid)
        attrs["copies"] = copies.get(node.uid)
        out[node.uid] = attrs
    return out


def diff_models(a: str | Path, b: str | Path, *, phase: str = "prefill", library=None) -> GraphDiff:
    """Diff two models (catalog names or model .yaml paths), each evaluated by the engine."""
    from archsql.evaluator import evaluate
    from archsql.specs import default_library

    library = library or default_library()
    analyses = [evaluate(m, library=library) for m in (a, b)]
    return diff_analyses(*analyses, phase=phase)


def diff_analyses(a, b, *, phase: str = "prefill") -> GraphDiff:
    """Diff two evaluated models (:class:`archsql.evaluator.Analysis`): what
    :func:`diff_models` reports, for models already evaluated (``archsql edit``'s)."""
    rows = _pair(_model_nodes(a, phase), _model_nodes(b, phase))
    return _table(a.model, b.model, "model", phase, rows)


def diff(a: str, b: str, *, phase: str = "prefill", library=None) -> GraphDiff:
    """Two components or two models (decided by the names; mixing is an error)."""
    from archsql.specs import default_library

    library = library or default_library()
    if phase not in ("prefill", "decode"):
        raise DesignError(f"unknown phase '{phase}'; use prefill or decode")
    kinds = [_kind(x, library) for x in (a, b)]
    for name, kind in zip((a, b), kinds, strict=True):
        if kind is None:
            raise _unknown(name, library)
    if kinds[0] != kinds[1]:
        raise DesignError(
            f"cannot diff a {kinds[0]} with a {kinds[1]}: '{a}' and '{b}'",
            [Issue("give two components or two models")],
        )
    if kinds[0] == "component":
        return diff_components(a, b, phase=phase, library=library)
    return diff_models(a, b, phase=phase, library=library)


def _kind(name: str, library) -> str | None:
    if name in library.component_files:
        return "component"
    path = Path(name)
    if name in library.model_files or (path.suffix in (".yaml", ".yml") and path.exists()):
        return "model"
    return None


def _unknown(name: str, library) -> DesignError:
    choices = [*library.component_files, *library.model_files]
    hint = did_you_mean(name, choices) or "components: archsql/specs/components/, models: `archsql models`"
    return DesignError(f"'{name}' is neither a component nor a model", [Issue(f"unknown name '{name}'", hint=hint)])


def _table(a: str, b: str, kind: str, phase: str, rows) -> GraphDiff:
    records = [
        {
            "a": a,
            "b": b,
            "kind": kind,
            "phase": phase,
            "path": path,
            "status": status,
            "attribute": attr,
            "a_value": av,
            "b_value": bv,
        }
        for path, status, attr, av, bv in rows
    ]
    return GraphDiff(a, b, kind, phase, pa.Table.from_pylist(records, schema=DIFF_SCHEMA))


def render(d: GraphDiff, console, max_rows: int | None = None) -> None:
    """Print a diff for a terminal: counts, then one-sided paths and changed attributes."""
    from rich.table import Table
    from rich.text import Text

    rows = d.rows()
    counts = {s: len(dict.fromkeys(r["path"] for r in rows if r["status"] == s)) for s in STATUSES}
    console.print(
        Text.assemble(
            (f"{d.kind} diff ({d.phase}): ", "bold"),
            (d.a, "red"),
            " → ",
            (d.b, "green"),
            f"   only in A: {counts['only_a']}   only in B: {counts['only_b']}   changed: {counts['changed']}",
        )
    )
    if not rows:
        console.print("identical declarations")
        return
    table = Table(header_style="bold", show_lines=False)
    for column in ("", "path", "attribute", "A", "B"):
        table.add_column(column, overflow="fold")
    marks = {"only_a": ("-", "red"), "only_b": ("+", "green"), "changed": ("~", "yellow")}
    lines = _collapse(rows)
    shown = lines if max_rows is None else lines[:max_rows]
    for status, path, attribute, a_value, b_value in shown:
        mark, style = marks[status]
        table.add_row(
            Text(mark, style=style),
            Text(path, style=style if status != "changed" else ""),
            Text(attribute or ""),
            Text(a_value or ""),
            Text(b_value or ""),
        )
    console.print(table)
    if len(shown) < len(lines):
        console.print(f"… {len(lines) - len(shown)} more rows (--format csv|json|parquet for every row)")


COLLAPSE_AT = 4  # the same change on this many paths prints as one line


def _collapse(rows: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str | None, str | None]]:
    """Rows for the terminal: one change repeated on many paths (a component swapped in
    every node of a slot) becomes one line naming how many paths it touches."""
    same: dict[tuple, list[str]] = {}
    for r in rows:
        if r["status"] == "changed":
            same.setdefault((r["attribute"], r["a_value"], r["b_value"]), []).append(r["path"])
    lines, done = [], set()
    for r in rows:
        key = (r["attribute"], r["a_value"], r["b_value"])
        paths = same.get(key, []) if r["status"] == "changed" else []
        if len(paths) >= COLLAPSE_AT:
            if key not in done:
                done.add(key)
                lines.append(("changed", f"{len(paths)} paths, e.g. {paths[0]}", *key))
            continue
        lines.append((r["status"], r["path"], r["attribute"], r["a_value"], r["b_value"]))
    return lines


__all__ = ["DIFF_SCHEMA", "GraphDiff", "diff", "diff_analyses", "diff_components", "diff_models", "render"]
