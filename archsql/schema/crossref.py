"""Cross-reference checks of components and models (ops, params, dims, roles, edges,
cycles, slots, caches).  Each check adds located issues to a Collector.  The ops are the
evaluator's primitives, read through the :mod:`archsql.schema.ops` hook."""

from __future__ import annotations

import re
from collections.abc import Mapping

from archsql.errors import did_you_mean, unknown_name
from archsql.schema.checks import Collector, add_issue, type_name
from archsql.schema.expr import ExprSyntaxError, dim_symbols, expr_names, parse_dim_expr
from archsql.schema.ops import known_ops
from archsql.schema.spec import ComponentSpec, NodeSpec, Where


def check_node_params(col: Collector, node: NodeSpec, prim: type, dims_table: Mapping[str, dict]) -> None:
    """Closed params of a primitive node; every dim expression names known dims."""
    params = prim.params
    symbols = dim_symbols(dims_table)
    for key, raw in node.dims.items():
        where = node.dims_where[key]
        if key not in params:
            hint = did_you_mean(key, params) or (
                f"{prim.name} takes: {', '.join(params)}" if params else f"{prim.name} takes no dims"
            )
            add_issue(col, where, f"unknown parameter '{key}' for op '{prim.name}'", hint=hint)
            continue
        kind = params[key].kind
        if kind == "ints":
            if not (isinstance(raw, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in raw)):
                add_issue(
                    col, where, f"'{key}' must be a list of integers", expected="list of integers", got=type_name(raw)
                )
            continue
        exprs = raw if kind == "dims" else [raw]
        if kind == "dims" and not isinstance(raw, list):
            add_issue(col, where, f"'{key}' must be a list of dim expressions", expected="list", got=type_name(raw))
            continue
        for text in exprs:
            try:
                parse_dim_expr(text, symbols)
            except ExprSyntaxError as exc:
                name_hint = None
                if isinstance(text, str):
                    unknown = [n for n in expr_names(text) if n not in symbols] if _parses(text) else []
                    if unknown:
                        name_hint = did_you_mean(unknown[0], symbols) or "declare new dims in archsql/specs/dims.yaml"
                add_issue(
                    col,
                    where,
                    str(exc).split(";")[0],
                    expected="a dim expression over declared dims",
                    got=type_name(text),
                    hint=name_hint,
                )
    for key, param in params.items():
        if param.required and key not in node.dims:
            add_issue(
                col,
                node.where,
                f"op '{prim.name}' needs parameter '{key}' ({param.doc})",
                hint=f"add '{key}: <dim expression>' under {node.where.path}.dims",
            )


def _parses(text: str) -> bool:
    try:
        expr_names(text)
        return True
    except ExprSyntaxError:
        return False


_LAYER_SLICE = re.compile(r"^(\w+)(?:\.\w+)?\s*\[([^\]]*)\]$")


def check_graph(
    col: Collector,
    graph: Mapping[str, NodeSpec],
    inputs: list[str],
    outputs: list[str],
    where_outputs: Where | None,
    where_root: Where,
    streams: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """Dangling ``in:`` references, unknown outputs and cycles.  Returns a topological order.

    ``streams``: stack node → the streams it declares besides the carried one; a model graph
    reads one as ``<stack node>.<stream>`` (a dependency on the stack node)."""
    streams = streams or {}
    stream_refs = {f"{n}.{s}": n for n, names in streams.items() for s in names}
    known = set(graph) | set(inputs) | set(stream_refs)
    for node in graph.values():
        for ref in node.inputs:
            if ref not in known:
                sliced = _LAYER_SLICE.match(ref)
                if sliced and sliced.group(1) in graph and graph[sliced.group(1)].stack is not None:
                    layers = sliced.group(2).strip() or "i"
                    after = f"[{layers}]" if ":" not in layers else f"'{layers}'"
                    add_issue(
                        col,
                        node.where,
                        f"node '{node.name}' reads '{ref}': a slice of a stack reads only the last layer; "
                        f"use an append stream with `after: {after}`",
                        hint=f"declare on stack '{graph[sliced.group(1)].stack}': streams: {{ layer_out: "
                        f"{{ from: hidden, after: {after}, read: concat, src: … }} }}, then read "
                        f"'in: {sliced.group(1)}.layer_out'",
                    )
                    continue
                hint = did_you_mean(ref, known) or f"known names here: {', '.join(sorted(known))}"
                add_issue(
                    col,
                    node.where,
                    f"node '{node.name}' reads '{ref}', which is neither a node nor an input",
                    hint=hint,
                )
    for name in inputs:
        if name in graph:
            add_issue(col, where_root, f"'{name}' is both an input and a node", hint="rename the node")
    for out in outputs if graph else ():  # an empty graph is reported where it is parsed
        if out not in graph:
            add_issue(
                col,
                where_outputs or where_root,
                f"output '{out}' is not a node",
                hint=did_you_mean(out, graph) or "list node names under outputs",
            )
    # Kahn's algorithm (a stream reference depends on its stack node)
    deps = {n: [stream_refs.get(r, r) for r in graph[n].inputs if stream_refs.get(r, r) in graph] for n in graph}
    indeg = {n: len(deps[n]) for n in graph}
    users: dict[str, list[str]] = {n: [] for n in graph}
    for n in graph:
        for r in deps[n]:
            users[r].append(n)
    order = [n for n in graph if indeg[n] == 0]
    i = 0
    while i < len(order):
        for u in users[order[i]]:
            indeg[u] -= 1
            if indeg[u] == 0:
                order.append(u)
        i += 1
    if len(order) < len(graph):
        stuck = [n for n in graph if n not in order]
        cycle = _find_cycle(graph, stuck)
        add_issue(
            col,
            graph[cycle[0]].where,
            "cycle in graph: " + " → ".join([*cycle, cycle[0]]),
            hint="a node cannot depend on its own output; cross-layer values go through a stack stream",
        )
        order += stuck
    return order


def _find_cycle(graph: Mapping[str, NodeSpec], stuck: list[str]) -> list[str]:
    stuck_set = set(stuck)
    node = stuck[0]
    seen: list[str] = []
    while node not in seen:
        seen.append(node)
        node = next(r.split(".")[0] for r in graph[node].inputs if r.split(".")[0] in stuck_set)
    return seen[seen.index(node) :]


def check_nodes(col: Collector, graph: Mapping[str, NodeSpec], library) -> None:
    """Per-node checks shared by component and model graphs: known op, its closed
    parameters and arity, known role."""
    prims = known_ops()
    for node in graph.values():
        if node.op is not None:
            if node.op not in prims:
                message, hint = unknown_name("op", node.op, prims)
                add_issue(col, node.where, message, hint=hint)
            else:
                check_node_params(col, node, prims[node.op], library.dims)
                _check_arity(col, node, prims[node.op])
        if node.role is not None and node.role not in library.roles:
            message, hint = unknown_name("role", node.role, library.roles)
            add_issue(col, node.where, message, hint=hint)


def check_component(col: Collector, comp: ComponentSpec, library) -> None:
    roles = library.roles
    if comp.role and comp.role not in roles:
        message, hint = unknown_name("role", comp.role, roles)
        add_issue(col, comp.where.get("role", Where(comp.file, None, None, "$.role")), message, hint=hint)
    for slot, accepted in comp.slots.items():
        for role in accepted:
            if role not in roles:
                message, hint = unknown_name("role", role, roles)
                add_issue(col, comp.where["slots"], f"slot '{slot}': {message}", hint=hint)
    check_nodes(col, comp.graph, library)
    for node in comp.graph.values():
        if node.slot is not None:
            if node.slot not in comp.slots:
                add_issue(
                    col,
                    node.where,
                    f"node '{node.name}' fills slot '{node.slot}', which the component does not declare",
                    hint=did_you_mean(node.slot, comp.slots) or "declare it under 'slots: {name: role}'",
                )
            if node.dims:
                add_issue(col, node.where, "a slot node takes no dims; the component filling it binds its own")
    for name in comp.reads:
        if name in comp.inputs:
            add_issue(
                col,
                comp.where["reads"],
                f"'{name}' is both an input and a stream the component reads",
                hint="an input comes from the enclosing block; a read comes from a stack stream — rename one",
            )
    check_graph(
        col,
        comp.graph,
        [*comp.inputs, *comp.reads],
        comp.outputs,
        comp.where.get("outputs"),
        comp.where.get("graph", Where(comp.file, None, None, "$")),
    )
    for entry in comp.cache if comp.graph else ():
        if entry.node not in comp.graph:
            add_issue(
                col,
                entry.where,
                f"cache entry names node '{entry.node}', which is not in the graph",
                hint=did_you_mean(entry.node, comp.graph),
            )
    if comp.decode_variant and comp.decode_variant not in library.component_files:
        message, hint = unknown_name("component", comp.decode_variant, library.component_files)
        add_issue(col, comp.where["decode_variant"], f"decode_variant: {message}", hint=hint)


def _check_arity(col: Collector, node: NodeSpec, prim: type) -> None:
    arity = prim.arity
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    if not lo <= len(node.inputs) <= hi:
        want = str(lo) if lo == hi else f"{lo}..{hi}"
        add_issue(
            col,
            node.where,
            f"op '{prim.name}' takes {want} input(s)",
            expected=f"{want} input(s) under 'in:'",
            got=f"{len(node.inputs)}",
        )
