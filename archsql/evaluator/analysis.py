"""Analysis: the evaluated facts of one model as Arrow tables keyed by node uid.

``analyze`` runs the passes (bind → expand → infer_shapes) once per phase and writes the
tables of :mod:`archsql.schema.tables`.  Everything else is a SQL view.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import sympy

from archsql.evaluator.layouts import propagate
from archsql.evaluator.liveness import live_tensors
from archsql.evaluator.terms import display, to_sql, to_terms
from archsql.evaluator.walk import Walk
from archsql.schema.tables import PHASES, TABLES


@dataclass
class Analysis:
    """Everything decided for one model: the walks (sympy) and the tables (Arrow)."""

    model: str
    dims: dict[str, int]
    walks: dict[str, Walk]  # phase -> walk
    tables: dict[str, pa.Table]
    # what the evaluation noticed without refusing the model: config keys the spec never read
    warnings: list = field(default_factory=list)

    def count(self, uid: str, symbolic: bool = False) -> sympy.Expr:
        """Copies of a node in the model (layers using its template × node copies)."""
        for w in self.walks.values():
            if uid in w.results:
                return node_count(w, w.results[uid], symbolic)[0]
        raise KeyError(uid)


def node_count(w: Walk, res, symbolic: bool) -> tuple[sympy.Expr, sympy.Expr]:
    node = res.node
    layers: sympy.Expr = sympy.Integer(1)
    if node.stack is not None:
        st = w.program.stacks[node.stack]
        n = st.schedule.count(node.template)
        layers = st.repeat_expr if (symbolic and n == st.layers) else sympy.Integer(n)
    if symbolic:
        return layers * res.copies, layers * res.active_copies
    return sympy.Integer(layers.xreplace(w.binding)) * res.copies.xreplace(w.binding), sympy.Integer(
        layers.xreplace(w.binding)
    ) * res.active_copies.xreplace(w.binding)


def _sha(*paths: str) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def build_tables(
    model_name: str, spec, config_path: str, dims: dict[str, int], walks: dict[str, Walk], library
) -> dict[str, pa.Table]:
    """The Analysis tables: the model and its dims, its stacks and streams, then every
    phase's nodes with their layouts, edges, shapes and quantities (per-instance facts —
    instances, weights, caches — once per uid)."""
    rows: dict[str, list[dict]] = {name: [] for name in TABLES}
    _emit_model(rows, model_name, spec, config_path, dims, library)
    _emit_stacks(rows, model_name, walks[PHASES[0]])
    _emit_streams(rows, model_name, walks)
    seen: set[str] = set()
    for phase in PHASES:
        _emit_phase(rows, model_name, phase, walks[phase], seen)
    return {name: pa.Table.from_pylist(rows[name], schema=schema) for name, schema in TABLES.items()}


def _emit_model(rows, model_name: str, spec, config_path: str, dims: dict[str, int], library) -> None:
    rows["models"].append(
        {
            "model": model_name,
            "hf_id": spec.hf_id,
            "spec_file": Path(spec.file).name,
            "config_file": Path(config_path).name,
            "spec_sha256": _sha(spec.file, config_path),
        }
    )
    for dim, value in sorted(dims.items()):
        rows["dims"].append(
            {
                "model": model_name,
                "dim": dim,
                "value": value,
                "binding": str(spec.dims[dim]),
                "kind": library.dims[dim]["kind"],
            }
        )


def _emit_stacks(rows, model_name: str, first: Walk) -> None:
    for st_name, st in first.program.stacks.items():
        rows["stacks"].append(
            {
                "model": model_name,
                "stack": st_name,
                "role": st.spec.role,
                "layers": st.layers,
                "first_layer": st.first_layer,
                "path": st.spec.path,
            }
        )
        for layer, template in enumerate(st.schedule, start=st.first_layer):
            rows["layer_schedule"].append({"model": model_name, "stack": st_name, "layer": layer, "template": template})


def _emit_phase(rows, model_name: str, phase: str, w: Walk, seen: set[str]) -> None:
    """One phase: layouts (propagate_layouts), liveness, and every node's rows."""
    node_layouts = propagate(w)
    for uid, live_uid in live_tensors(w, _sources):
        rows["liveness"].append({"model": model_name, "phase": phase, "uid": uid, "live_uid": live_uid})
    for uid, res in w.results.items():
        _emit_layout(rows, model_name, phase, uid, res, node_layouts[uid], w, seen)
        _emit_node(rows, model_name, phase, uid, res, w)
        _emit_quantities(rows, model_name, phase, uid, res, w)
        if uid in seen:
            continue
        seen.add(uid)
        _emit_instance(rows, model_name, uid, res, w)


def _emit_node(rows, model_name: str, phase: str, uid: str, res, w: Walk) -> None:
    """The node, its input edges and its output shape."""
    node = res.node
    rows["nodes"].append(
        {
            "model": model_name,
            "phase": phase,
            "uid": uid,
            "stack": node.stack,
            "template": node.template,
            "path": node.path,
            "op": node.op,
            "role": node.role,
            "component": node.component,
        }
    )
    for port, ref in enumerate(node.inputs):
        for src, stream in _sources(w, node, ref):
            rows["edges"].append(
                {
                    "model": model_name,
                    "phase": phase,
                    "src_uid": src,
                    "dst_uid": uid,
                    "port": port,
                    "stream": stream,
                }
            )
    for axis, ax in enumerate(res.shape):
        sym = str(ax.value) if ax.runtime else None
        rows["shapes"].append(
            {
                "model": model_name,
                "phase": phase,
                "uid": uid,
                "axis": axis,
                "dim": ax.label,
                "size": None if ax.runtime else int(ax.value),
                "symbol": sym,
            }
        )


def _emit_quantities(rows, model_name: str, phase: str, uid: str, res, w: Walk) -> None:
    """FLOPs, activation reads / writes, cache reads and cache elements, as term rows."""
    quantities = [
        ("flops", res.flops),
        ("read_elements", res.io[0]),
        ("write_elements", res.io[1]),
        ("cache_read_elements", res.io[2]),
    ]
    if res.caches:
        quantities.append(("cache_elements", sum((f.expr() for f in res.caches), sympy.Integer(0))))
    for quantity, expr in quantities:
        if quantity == "flops" or expr != 0:  # zero traffic rows say nothing
            ports = res.read_ports if quantity == "read_elements" else ()
            _emit(rows, model_name, phase, uid, quantity, expr, w, ports)


def _emit_instance(rows, model_name: str, uid: str, res, w: Walk) -> None:
    """Facts of a node the same in every phase: its copies, weights and caches."""
    node = res.node
    count, active = node_count(w, res, symbolic=False)
    rows["instances"].append({"model": model_name, "uid": uid, "count": int(count), "active_count": int(active)})
    for decl in res.weights:
        shape = [int(a.value) for a in decl.axes]
        tensor = node.tensor_rename.get(decl.tensor, decl.tensor)  # slot fill rename: {sinks: …}
        name = node.path + (f".{tensor}" if decl.suffix is None else decl.suffix)
        if res.copies != 1 and not decl.stacked:
            parts = name.rsplit(".", 2)
            name = name if "{expert}" in name else f"{parts[0]}.{{expert}}.{parts[1]}.{parts[2]}"
        rows["weights"].append(
            {
                "model": model_name,
                "uid": uid,
                "tensor": tensor,
                "name": name,
                "shape": shape,
                "elements": int(sympy.Mul(*shape)),
                "streamed": decl.streamed,
            }
        )
    for fact in res.caches:
        rows["caches"].append(
            {
                "model": model_name,
                "uid": uid,
                "cache": fact.family,
                "kind": fact.kind,
                "growth": fact.growth,
                "elements": int(fact.elements.value),
                # growth chunk: the chunk length (the span that bounds the cache)
                "window": int((fact.window or fact.chunk).value) if (fact.window or fact.chunk) else None,
                "ratio": int(fact.ratio.value) if fact.ratio else None,
                "dtype": fact.dtype,
                "scale_dtype": fact.scale_dtype,
                "scale_block": fact.scale_block,
            }
        )


def _emit_layout(rows, model: str, phase: str, uid: str, res, lay, w: Walk, seen: set[str]) -> None:
    """Layout rows of a node (output, weights, consumed inputs, expert copies) and its
    collectives as nodes."""
    tensors = [("out", lay.out), *lay.weights.items(), *((f"in{p}", x) for p, x in enumerate(lay.ins))]
    for tensor, layout in tensors:
        for axis, group in layout.sharded:
            parts = lay.parts.get((tensor, axis))
            fused = isinstance(parts, tuple)
            rows["layouts"].append(
                {
                    "model": model,
                    "phase": phase,
                    "uid": uid,
                    "tensor": tensor,
                    "axis": axis,
                    "placement": "S",
                    "group": group,
                    "parts": None if fused else parts,
                    "segments": [{"size": s, "parts": p} for s, p in parts] if fused else None,
                }
            )
        for group in sorted(layout.partial):
            rows["layouts"].append(
                {
                    "model": model,
                    "phase": phase,
                    "uid": uid,
                    "tensor": tensor,
                    "axis": -1,
                    "placement": "P",
                    "group": group,
                    "parts": None,
                    "segments": None,
                }
            )
    if lay.copies_group:
        rows["layouts"].append(
            {
                "model": model,
                "phase": phase,
                "uid": uid,
                "tensor": "copies",
                "axis": -1,
                "placement": "S",
                "group": lay.copies_group,
                "parts": _int_or_none(res.copies.xreplace(w.binding)),  # experts per layer (the fit rule)
                "segments": None,
            }
        )
    node = res.node
    count, _ = node_count(w, res, symbolic=False)
    for coll in lay.collectives:
        cuid = f"{uid}#{coll.kind}[{coll.port}]{coll.tag}"
        _emit_message(rows, model, phase, cuid, coll)
        rows["collectives"].append(
            {
                "model": model,
                "phase": phase,
                "uid": cuid,
                "consumer_uid": uid,
                "port": coll.port,
                "kind": coll.kind,
                "group": coll.group,
            }
        )
        rows["nodes"].append(
            {
                "model": model,
                "phase": phase,
                "uid": cuid,
                "stack": node.stack,
                "template": node.template,
                "path": node.path,
                "op": coll.kind,
                "role": node.role,
                "component": node.component,
            }
        )
        if cuid not in seen:  # one instances row per uid across phases; one collective per occurrence
            seen.add(cuid)
            occurrences = int(count // res.copies.xreplace(w.binding))
            rows["instances"].append({"model": model, "uid": cuid, "count": occurrences, "active_count": occurrences})
        _emit(rows, model, phase, cuid, "comm_elements", coll.elements, w)


def _emit_message(rows, model: str, phase: str, cuid: str, coll) -> None:
    """Layout rows (tensor 'message') of the tensor a collective communicates, as one device
    holds it: the views divide the global elements by its groups' degrees."""
    parts = dict(coll.parts)
    for axis, group in coll.message.sharded if coll.message is not None else ():
        rows["layouts"].append(
            {
                "model": model,
                "phase": phase,
                "uid": cuid,
                "tensor": "message",
                "axis": axis,
                "placement": "S",
                "group": group,
                "parts": parts.get(axis),
                "segments": None,
            }
        )


def _int_or_none(value) -> int | None:
    return int(value) if getattr(value, "is_Integer", False) else None


def _emit(rows, model: str, phase: str, uid: str, quantity: str, expr: sympy.Expr, w: Walk, ports: tuple = ()) -> None:
    """Term rows and display formulas of one per-instance quantity of one node; with
    ``ports`` (the quantity per input port, summing to ``expr``) the term rows are per port."""
    bound = w.bind(expr)
    per_port = [(p, w.bind(e)) for p, e in enumerate(ports) if e != 0] if ports else [(None, bound)]
    for port, part in per_port:
        for coef, eb, es, ec, factor, arg in to_terms(part):
            rows["terms"].append(
                {
                    "model": model,
                    "phase": phase,
                    "uid": uid,
                    "quantity": quantity,
                    "coef": coef,
                    "e_B": eb,
                    "e_s": es,
                    "e_c": ec,
                    "factor": factor,
                    "factor_arg": arg,
                    "port": port,
                }
            )
    rows["formulas"].append(
        {
            "model": model,
            "phase": phase,
            "uid": uid,
            "quantity": quantity,
            "symbolic": display(expr),
            "bound": display(bound),
            "sql": to_sql(bound),
        }
    )


def _emit_streams(rows, model: str, walks: dict[str, Walk]) -> None:
    """``streams``: every stream of every stack (carried, internal, append) with its
    producers, readers (both phases) and ``src``; ``stream_reads``: for every reading layer
    (or model-graph node) the layers whose values it reads — for read: all / concat the
    history length → layers distribution (``group by elements``)."""
    first = walks[PHASES[0]].program
    readers: dict[str, list[str]] = {}
    producers: dict[str, list[str]] = {}
    reads: dict[tuple, dict] = {}
    for phase in PHASES:
        program = walks[phase].program
        for node in program.nodes:
            for ref in node.inputs:
                if ref.kind != "stream":
                    continue
                key = ref.stream if not program.is_carried(ref) else f"{ref.name}:{ref.stream}"
                readers.setdefault(key, []).append(node.uid)
                if program.is_carried(ref):
                    continue
                stream, stacks = program.streams[ref.stream], program.stacks
                for j, refs in program.stream_reads(ref, node):
                    layer = None if j is None else j + stacks[node.stack].first_layer
                    elements = stream.elements(program, node.stack, j)
                    reads.setdefault(
                        (ref.stream, node.stack, layer),
                        {
                            "model": model,
                            "stream": ref.stream,
                            "stack": node.stack,
                            "layer": layer,
                            "template": node.template,
                            "elements": len(refs),
                            "element_layers": [i + stacks[stream.stack].first_layer for i in elements],
                        },
                    )
        for name, stream in program.streams.items():
            st = program.stacks.get(stream.stack)
            if st is None:
                continue
            producers.setdefault(name, [])
            producers[name] += [
                ref.name for i in stream.layers if (ref := program.element_ref(stream, i)) and ref.kind == "node"
            ]
        for st_name, st in program.stacks.items():
            producers.setdefault(f"{st_name}:{st.stream}", [])
            producers[f"{st_name}:{st.stream}"] += [r.name for r in st.outputs.values() if r.kind == "node"]
    for st_name, st in first.stacks.items():
        for name, spec in st.spec.stream_specs.items():
            stream = first.streams.get(name)
            if spec.kind == "carried":
                key, layers = f"{st_name}:{name}", list(range(st.layers))
            elif stream is not None and stream.stack == st_name:
                key, layers = name, stream.layers
            else:
                continue
            rows["streams"].append(
                {
                    "model": model,
                    "stack": st_name,
                    "stream": name,
                    "kind": spec.kind,
                    "read": spec.read,
                    "archive_at": spec.at,
                    "source": spec.source,
                    "layers": [i + st.first_layer for i in layers],
                    "producers": list(dict.fromkeys(producers.get(key, []))),
                    "readers": list(dict.fromkeys(readers.get(key, []))),
                    "src": spec.src,
                }
            )
    rows["stream_reads"].extend(reads.values())


def _sources(w: Walk, node, ref):
    """Producer uids of one input reference (a carried stream has several)."""
    if ref.kind == "node":
        return [(ref.name, None)]
    if ref.kind == "input":
        return [(None, None)]
    st = w.program.stacks[ref.name]
    if ref.stream != st.stream:  # an internal / append stream: the producers of the values it reads
        sources = [
            (src, ref.stream)
            for _, refs in w.program.stream_reads(ref, node)
            for element in refs
            for src, _ in _sources(w, node, element)
        ]
        return list(dict.fromkeys(sources))
    if node.stack != ref.name and not st.schedule:  # an empty stack passes its input through
        return _sources(w, node, st.input)
    if node.stack != ref.name:  # after the stack: the last layer's output
        out = st.outputs.get(st.schedule[-1])
        return [(out.name if out else None, ref.stream)]
    sources = []
    first_src = _sources(w, node, st.input) if st.input.kind != "stream" else [(None, None)]
    if st.schedule[0] == node.template:
        sources.extend((s, ref.stream) for s, _ in first_src)
    prev = {st.schedule[i] for i in range(len(st.schedule) - 1) if st.schedule[i + 1] == node.template}
    for t in sorted(prev):
        out = st.outputs.get(t)
        if out is not None:
            sources.append((out.name, ref.stream))
    return sources
