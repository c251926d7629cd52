"""expand: model spec → SpecIR, once per phase.

Slots are filled with components (the decode phase swaps in a component's
``decode_variant``), nodes get uids (declaration path: ``stack/template/slot.node``) and
checkpoint-style paths (``model.layers.{layer}.self_attn.q_proj``), inputs become
references to producer uids, model inputs or a stack's carried stream.  Each block
template is expanded once; the schedule says how many layers use it.  A template's
``dims:`` overrides (``{n_kv_heads: n_kv_heads_swa, window: 0}``) are substituted into the
dim expressions of its nodes and cache declarations as it is expanded, so per-layer-type
sizes stay distinct dims and every symbolic formula stays unambiguous.

Streams (docs/specir.md "Streams"): besides the carried residual, a stack may declare
internal streams (a node's value in one layer, read by a later layer: the latest producing
layer's value) and append streams (values archived on chosen layers, read ``each`` / ``all``
/ ``concat``).  Components read them by name (``reads:``), the model graph as
``<stack node>.<stream>``.  A template whose layers see different archive lengths
(``read: all`` / ``concat`` inside the archiving stack) is expanded once per length, as the
group template ``<template>@<length>``; the schedule names the group of every layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy

from archsql.errors import unknown_name
from archsql.evaluator.ir import IRNode, Program, Ref, StackIR, StreamIR
from archsql.evaluator.schedule import ScheduleExpansion, templates_named
from archsql.evaluator.streams import StreamExpansion, stack_stream_names
from archsql.schema.checks import Collector, add_issue, type_name
from archsql.schema.crossref import check_graph
from archsql.schema.expr import ExprSyntaxError, dim_symbols, parse_dim_expr, substitute_dims
from archsql.schema.spec import CacheEntry, ComponentSpec, ModelSpec, NodeSpec, SlotFill, StackSpec, StreamSpec, Where

# Every layer of a stack is expanded into nodes and walked, per phase: time and memory grow
# with the layer count (a million layers: minutes and gigabytes).  Published decoders have a
# few hundred layers at most (Llama 3.1 405B: 126), so a bound two orders of magnitude above
# refuses a mistyped or hostile count at once, before any expansion.
MAX_STACK_LAYERS = 10_000


def _first_path(*candidates: str | None) -> str:
    """The first declared path; an explicit "" means: no segment of its own."""
    return next(c for c in candidates if c is not None)


def _under(prefix: str, path: str) -> str:
    """A node's or slot fill's module path under its parent's prefix; ``/a.b`` names a
    module of the model root instead (a checkpoint module that lives outside the layer that
    runs it, e.g. Qwen3-VL's DeepStack mergers ``/model.visual.deepstack_merger_list.{layer}``
    applied by decoder layer {layer}), keeping placeholders such as {layer}."""
    return path[1:] if path.startswith("/") else f"{prefix}{path}"


def _rename(path: str, rename: dict[str, str]) -> str:
    """A fill's rename: a key naming the whole local path (``experts.{expert}.gate_proj``)
    replaces it; other keys rename single segments (``gate_proj: w1``)."""
    if path in rename:
        return rename[path]
    return ".".join(rename.get(seg, seg) for seg in path.split("."))


class _Expander(StreamExpansion, ScheduleExpansion):
    def __init__(self, model: ModelSpec, library, dims: dict[str, int], phase: str, col: Collector, config=None):
        self.model, self.library, self.dims, self.phase, self.col = model, library, dims, phase, col
        self.config = config or {}
        self.scheduled: set[str] = set()  # templates named by any stack's schedule
        self.nodes: list[IRNode] = []
        self.symbols = dim_symbols(library.dims)
        self.subst: dict[str, str] = {}  # the template being expanded: dim -> expression it reads
        self.subst_used: set[str] = set()
        # streams: declared (name -> owning stack spec), expanded, and every read (uid, stream, stack, template)
        self.declared: dict[str, tuple[StackSpec, StreamSpec]] = {}
        for st in model.stacks.values():
            for name, sspec in st.stream_specs.items():
                if sspec.kind == "carried":
                    continue
                if name in self.declared:
                    add_issue(
                        col,
                        sspec.where,
                        f"stream '{name}' is declared on stacks '{self.declared[name][0].name}' and '{st.name}'",
                        hint="components read streams by name: give each stream its own name",
                    )
                self.declared.setdefault(name, (st, sspec))
        self.streams: dict[str, StreamIR] = {}
        self.reads: list[tuple[str, str, str | None, str | None]] = []
        self.expanded_stacks: set[str] = set()

    # -- components -------------------------------------------------------------------
    def component(self, fill: SlotFill) -> ComponentSpec | None:
        try:
            comp = self.library.component(fill.component)
        except Exception as exc:  # SpecError from the library: keep all issues
            from archsql.errors import SpecError

            if isinstance(exc, SpecError) and exc.issues and exc.issues[0].file:
                self.col.issues.extend(exc.issues)
            else:
                message, hint = unknown_name("component", fill.component, self.library.component_files)
                add_issue(self.col, fill.where, message, hint=hint)
            return None
        if self.phase == "decode" and comp.decode_variant:
            return self.component(SlotFill(comp.decode_variant, fill.path, fill.rename, fill.where))
        return comp

    def expand_component(
        self,
        comp: ComponentSpec,
        uid_prefix: str,
        path_prefix: str,
        bound_inputs: list[Ref],
        fills: dict[str, SlotFill],
        rename: dict[str, str],
        stack: str | None,
        template: str | None,
        where: Where,
    ) -> dict[str, Ref]:
        if len(bound_inputs) != len(comp.inputs):
            add_issue(
                self.col,
                where,
                f"component '{comp.name}' takes {len(comp.inputs)} input(s) ({', '.join(comp.inputs)})",
                expected=str(len(comp.inputs)),
                got=str(len(bound_inputs)),
            )
            return {}
        scope: dict[str, Ref] = dict(zip(comp.inputs, bound_inputs, strict=True))
        for name in comp.reads:
            ref = self.stream_ref(name, comp, stack)
            if ref is not None:
                scope[name] = ref
        order = check_graph(Collector(comp.file), comp.graph, [*comp.inputs, *comp.reads], comp.outputs, None, where)
        container = self.library.roles.get(comp.role, {}).get("container", False)
        cache_of = {}
        for entry in comp.cache:
            cache_of.setdefault(entry.node, []).append((comp.cache_family or "kv", entry))
        for name in order:
            node = comp.graph[name]
            inputs = [scope[r] for r in node.inputs if r in scope]
            if len(inputs) != len(node.inputs):
                continue  # reported by the component check
            local = _rename(_first_path(node.path, node.name), rename)
            uid = f"{uid_prefix}{name}"
            # path: "" puts the node's tensors on the component's own module (Mamba's A_log, D);
            # a path starting with "/" is a module of the model root (_under)
            path = _under(path_prefix, local) if local else path_prefix.rstrip(".")
            if node.slot is not None:
                out = self.expand_slot(comp, node, uid, path_prefix, inputs, fills, rename, stack, template, where)
                if out is not None:
                    scope[name] = out
                continue
            role = node.role or ((_default_role(node) or comp.role) if container else comp.role)
            self.nodes.append(
                IRNode(
                    uid,
                    name,
                    path,
                    node.op,
                    role,
                    comp.name,
                    inputs,
                    self.substituted(node.dims),
                    node.dims_where,
                    node.where,
                    stack,
                    template,
                    [(family, self.substituted_cache(entry)) for family, entry in cache_of.get(name, [])],
                    node,
                    rename,
                )
            )
            self.reads.extend(
                (uid, r.stream, stack, template) for r in inputs if r.kind == "stream" and r.stream in self.declared
            )
            scope[name] = Ref("node", uid)
        return {o: scope[o] for o in comp.outputs if o in scope}

    def expand_slot(
        self,
        comp: ComponentSpec,
        node: NodeSpec,
        uid: str,
        path_prefix: str,
        inputs: list[Ref],
        fills: dict[str, SlotFill],
        rename: dict[str, str],
        stack: str | None,
        template: str | None,
        where: Where,
    ) -> Ref | None:
        """A slot node: the component filling it, expanded in place (its one output)."""
        fill = fills.get(node.slot)
        if fill is None:
            add_issue(
                self.col,
                where,
                f"slot '{node.slot}' of '{comp.name}' is not filled",
                hint=f"add '{node.slot}: <component>' to the model's components or to this template",
            )
            return None
        sub = self.component(fill)
        if sub is None:
            return None
        accepted = comp.slots.get(node.slot, [])
        if accepted and sub.role not in accepted:
            add_issue(
                self.col,
                fill.where,
                f"component '{sub.name}' has role '{sub.role}' but slot '{node.slot}' of '{comp.name}' takes {' | '.join(accepted)}",
                expected=" | ".join(accepted),
                got=sub.role,
            )
        sub_path = _rename(_first_path(fill.path, node.path, node.name), rename)
        outs = self.expand_component(
            sub,
            f"{uid}.",
            f"{_under(path_prefix, sub_path)}." if sub_path else path_prefix,
            inputs,
            fills,
            fill.rename,
            stack,
            template,
            fill.where,
        )
        if len(sub.outputs) != 1:
            add_issue(
                self.col,
                fill.where,
                f"component '{sub.name}' fills a slot, so it must have exactly one output",
                expected="1 output",
                got=str(sub.outputs),
            )
        return outs.get(sub.outputs[0]) if sub.outputs else None

    # -- per-template dims ------------------------------------------------------------
    def substituted(self, dims: dict[str, Any]) -> dict[str, Any]:
        """A node's dims as its template reads them (``templates.<t>.dims`` overrides)."""
        if not self.subst:
            return dims
        out = {}
        for key, raw in dims.items():
            out[key], names = substitute_dims(raw, self.subst)
            self.subst_used |= names
        return out

    def substituted_cache(self, entry: CacheEntry) -> CacheEntry:
        if not self.subst:
            return entry
        window, used_w = substitute_dims(entry.window, self.subst)
        ratio, used_r = substitute_dims(entry.ratio, self.subst)
        chunk, used_c = substitute_dims(entry.chunk, self.subst)
        self.subst_used |= used_w | used_r | used_c
        return dataclasses.replace(entry, window=window, ratio=ratio, chunk=chunk)

    def template_overrides(self, template: str) -> dict[str, str]:
        """The template's dim overrides, checked like model dims: known dims, values dim
        expressions over known dims."""
        raw = self.model.template_dims.get(template, {})
        where = self.model.template_dims_where.get(template, {})
        out: dict[str, str] = {}
        for dim, value in raw.items():
            if dim not in self.library.dims:
                message, hint = unknown_name("dim", str(dim), self.library.dims)
                add_issue(
                    self.col, where[dim], message, hint=f"{hint} (new dims are declared in archsql/specs/dims.yaml)"
                )
                continue
            try:
                parse_dim_expr(value, self.symbols)
            except ExprSyntaxError as exc:
                add_issue(
                    self.col,
                    where[dim],
                    f"template '{template}' dims.{dim}: {exc}",
                    expected="a dim expression over declared dims (bind new dims under the model's dims:)",
                    got=type_name(value),
                )
                continue
            out[dim] = value
        return out

    def check_overrides_used(self, template: str) -> None:
        for dim in self.model.template_dims.get(template, {}):
            if dim in self.subst and dim not in self.subst_used:
                add_issue(
                    self.col,
                    self.model.template_dims_where[template][dim],
                    f"template '{template}' overrides dim '{dim}', which none of its nodes uses",
                    hint="remove the override, or check the template's components",
                )

    # -- the model --------------------------------------------------------------------
    def run(self) -> Program:
        model = self.model
        scope: dict[str, Ref] = {name: Ref("input", name) for name in model.inputs}
        stacks: dict[str, StackIR] = {}
        root = model.where.get("graph", Where(model.file, None, None, "$.graph"))
        order = check_graph(
            self.col,
            model.graph,
            model.inputs,
            model.outputs,
            model.where.get("outputs"),
            root,
            stack_stream_names(model),
        )
        for name in order:
            node = model.graph[name]
            inputs = [scope[r] for r in node.inputs if r in scope]
            if len(inputs) != len(node.inputs):
                continue
            if node.stack is not None:
                st = self.expand_stack(node, inputs)
                if st is not None:
                    stacks[node.stack] = st
                    scope[name] = Ref("stream", node.stack, st.stream)
                    for stream in stack_stream_names(model).get(name, []):
                        scope[f"{name}.{stream}"] = Ref("stream", node.stack, stream)
                continue
            if node.slot is not None:
                continue
            role = node.role or _default_role(node) or "model"
            self.nodes.append(
                IRNode(
                    name,
                    name,
                    node.path or name,
                    node.op,
                    role,
                    "model",
                    inputs,
                    node.dims,
                    node.dims_where,
                    node.where,
                    spec=node,
                )
            )
            self.reads.extend(
                (name, r.stream, None, None) for r in inputs if r.kind == "stream" and r.stream in self.declared
            )
            scope[name] = Ref("node", name)
        outputs = {o: scope[o] for o in model.outputs if o in scope}
        unused = [t for t in model.templates if t not in self.scheduled]
        if unused and not self.col.issues:
            add_issue(
                self.col,
                model.templates_where[unused[0]],
                f"template '{unused[0]}' is declared but no stack schedules it",
                hint="remove it or add it to a schedule",
                rule="template_unscheduled",
            )
        program = Program(model, self.phase, self.nodes, stacks, outputs, self.streams)
        if not self.col.issues:
            for stream in self.streams.values():
                if stream.stack in stacks and stacks[stream.stack].layers:
                    self.check_stream(program, stream)
        if not self.col.issues:
            program.nodes = self.dataflow_order(program)
        return program

    def dataflow_order(self, program: Program) -> list[IRNode]:
        """The nodes with every stream producer before its readers (a stable topological
        order: templates expand in schedule order, a reader may come before its producer)."""
        import heapq

        index = {n.uid: i for i, n in enumerate(program.nodes)}
        deps: dict[str, set[str]] = {}
        for node in program.nodes:
            d = {r.name for r in node.inputs if r.kind == "node"}
            for r in node.inputs:
                if r.kind == "stream" and not program.is_carried(r):
                    d |= {e.name for _, refs in program.stream_reads(r, node) for e in refs if e.kind == "node"}
            deps[node.uid] = {u for u in d if u in index and u != node.uid}
        users: dict[str, list[str]] = {u: [] for u in index}
        for u, d in deps.items():
            for v in d:
                users[v].append(u)
        indeg = {u: len(d) for u, d in deps.items()}
        ready = [index[u] for u, k in indeg.items() if k == 0]
        heapq.heapify(ready)
        out: list[IRNode] = []
        while ready:
            node = program.nodes[heapq.heappop(ready)]
            out.append(node)
            for u in users[node.uid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, index[u])
        if len(out) < len(program.nodes):
            stuck = [n for n in program.nodes if indeg[n.uid] > 0]
            reader = next(n for n in stuck if any(r.kind == "stream" and not program.is_carried(r) for r in n.inputs))
            name = next(r.stream for r in reader.inputs if r.kind == "stream" and not program.is_carried(r))
            spec = program.streams[name].spec
            add_issue(
                self.col,
                spec.keys_where.get("from", spec.where),
                f"stream '{name}' feeds its own producer: '{reader.uid}' reads it and the producer depends on it",
                hint="a value every layer updates from the previous one is the carried stream "
                "(a multi-copy residual: one carried stream with an extra axis)",
            )
            return program.nodes
        return out

    def expand_stack(self, node: NodeSpec, inputs: list[Ref]) -> StackIR | None:
        model = self.model
        spec = model.stacks.get(node.stack)
        if spec is None:
            message, hint = unknown_name("stack", node.stack, model.stacks)
            add_issue(self.col, node.where, message, hint=hint or "declare it under 'stacks:'")
            return None
        if not inputs:
            add_issue(
                self.col,
                node.where,
                "a stack node reads its carried stream's initial value first (then values every layer reads)",
                expected="in: [initial value, ...]",
                got="no input",
            )
            return None
        carried = [n for n, st in spec.stream_specs.items() if st.kind == "carried"]
        if not carried:
            add_issue(
                self.col,
                spec.where,
                "a stack needs exactly one carried stream (the residual)",
                expected="streams: {hidden: {carries: true}}",
                got=f"{len(carried)} carried streams",
            )
            return None
        try:
            repeat_expr = parse_dim_expr(spec.repeat, self.symbols)
            layers = sympy.sympify(
                repeat_expr.xreplace({self.symbols[k]: sympy.Integer(v) for k, v in self.dims.items()})
            )
        except ExprSyntaxError as exc:
            add_issue(
                self.col,
                spec.keys_where.get("repeat", spec.where),
                f"repeat of stack '{spec.name}': {exc}",
                expected="a dim expression over declared dims",
                got=repr(spec.repeat),
            )
            return None
        if not layers.is_Integer or int(layers) < 0:
            missing = sorted(str(s) for s in layers.free_symbols)
            add_issue(
                self.col,
                spec.keys_where.get("repeat", spec.where),
                f"repeat of stack '{spec.name}' must bind to an integer >= 0",
                expected="an integer >= 0 (0: the stack is absent, e.g. no MTP layers)",
                got=str(layers),
                hint=f"bind {', '.join(missing)} under dims: — dims are never defaulted" if missing else None,
            )
            return None
        layers = int(layers)
        if layers > MAX_STACK_LAYERS:
            bound = ", ".join(
                f"{k} = {v:,}" for k, v in sorted(self.dims.items()) if k in map(str, repeat_expr.free_symbols)
            )
            add_issue(
                self.col,
                spec.keys_where.get("repeat", spec.where),
                f"repeat of stack '{spec.name}' is {layers:,} layers, above the bound of {MAX_STACK_LAYERS:,}"
                + (f" ({bound})" if bound else ""),
                expected=f"at most {MAX_STACK_LAYERS:,} layers (every layer is expanded and walked)",
                got=f"{layers:,}",
                hint="check the layer count the config gives (e.g. num_hidden_layers)",
            )
            return None
        self.scheduled |= templates_named(spec.schedule)
        schedule = self.schedule(spec, layers) if layers else []
        if schedule is None:
            return None
        stream_ref = Ref("stream", spec.name, carried[0])
        for name, sspec in spec.stream_specs.items():
            if sspec.kind == "carried" or self.declared.get(name, (None,))[0] is not spec:
                continue
            stream = StreamIR(sspec, spec.name, carried[0])
            if sspec.kind == "append" and layers:
                archived = self.stream_layers(sspec, layers, spec.name)
                if archived is None:
                    continue
                stream.layers = archived
            self.streams[name] = stream
        outputs: dict[str, Ref] = {}
        schedule = list(schedule)
        for template in dict.fromkeys(schedule):
            start, reads_start = len(self.nodes), len(self.reads)
            out = self.expand_template(spec, template, template, [stream_ref, *inputs[1:]])
            history = self.history_streams(spec.name, self.reads[reads_start:])
            t_layers = [j for j, t in enumerate(schedule) if t == template]
            lengths = {j: tuple(len(self.streams[h].history(j)) for h in history) for j in t_layers}
            groups = sorted(set(lengths.values()))
            if len(groups) > 1:  # layers see archives of different lengths: one expansion per length
                del self.nodes[start:]
                del self.reads[reads_start:]
                for key in groups:
                    group = f"{template}@{'_'.join(map(str, key))}"
                    out = self.expand_template(spec, template, group, [stream_ref, *inputs[1:]])
                    if out is not None:
                        outputs[group] = out
                    for j in t_layers:
                        if lengths[j] == key:
                            schedule[j] = group
                continue
            if out is not None:
                outputs[template] = out
        self.expanded_stacks.add(spec.name)
        first = self.bound_int(str(spec.first_layer))
        if first is False or first < 0:
            add_issue(
                self.col,
                spec.keys_where.get("first_layer", spec.where),
                f"first_layer of stack '{spec.name}' must bind to an integer >= 0",
                got=repr(spec.first_layer),
            )
            return None
        return StackIR(spec, layers, repeat_expr, carried[0], inputs[0], schedule, outputs, first)

    def expand_template(self, spec: StackSpec, template: str, name: str, inputs: list[Ref]) -> Ref | None:
        """Expand block template ``template`` of stack ``spec`` once, as ``name`` (the
        template itself, or one of its history-length groups); returns the block output."""
        fills = {**self.model.components, **self.model.templates[template]}
        block = fills.get("block")
        if block is None:
            add_issue(
                self.col,
                self.model.templates_where[template],
                f"template '{template}' has no 'block' component",
                hint="add 'block: <component>' to the template or to the model's components",
            )
            return None
        comp = self.component(block)
        if comp is None:
            return None
        self.subst, self.subst_used = self.template_overrides(template), set()
        outs = self.expand_component(
            comp,
            f"{spec.name}/{name}/",
            f"{spec.path}.{{layer}}.",
            inputs,
            fills,
            block.rename,
            spec.name,
            name,
            block.where,
        )
        self.check_overrides_used(template)
        self.subst = {}
        if len(comp.outputs) == 1 and comp.outputs[0] in outs:
            return outs[comp.outputs[0]]
        return None


def _default_role(node: NodeSpec) -> str | None:
    from archsql.evaluator.primitives.base import registry

    prim = registry().get(node.op or "")
    return prim.default_role if prim else None


def expand(model: ModelSpec, library, dims: dict[str, int], phase: str, col: Collector, config=None) -> Program:
    """SpecIR for one phase; issues go to ``col``."""
    return _Expander(model, library, dims, phase, col, config or {}).run()


__all__ = ["expand"]
