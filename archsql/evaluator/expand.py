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
from dataclasses import dataclass, field
from typing import Any

import sympy

from archsql.errors import Issue, did_you_mean, unknown_name
from archsql.schema.checks import Collector, type_name
from archsql.schema.checks import add_issue as _add
from archsql.schema.crossref import check_graph
from archsql.schema.expr import ExprSyntaxError, dim_symbols, parse_dim_expr, substitute_dims
from archsql.schema.spec import CacheEntry, ComponentSpec, ModelSpec, NodeSpec, SlotFill, StackSpec, StreamSpec, Where
from archsql.schema.yamlsrc import LocList


@dataclass(frozen=True)
class Ref:
    """An input reference: a node uid, a model input, or a stack's stream (its carried
    stream, or an internal / append stream it declares: ``Program.streams``)."""

    kind: str  # 'node' | 'input' | 'stream'
    name: str  # uid, input name, or stack name
    stream: str | None = None


@dataclass
class IRNode:
    uid: str
    name: str
    path: str
    op: str
    role: str
    component: str
    inputs: list[Ref]
    dims: dict[str, Any]
    dims_where: dict[str, Where]
    where: Where
    stack: str | None = None
    template: str | None = None
    cache: list[tuple[str, CacheEntry]] = field(default_factory=list)  # (family, declaration)
    spec: NodeSpec | None = None  # the declaration this node was expanded from
    # checkpoint names of the node's tensors when they differ from the primitive's (the slot
    # fill's rename:, which maps path segments and tensor names alike)
    tensor_rename: dict[str, str] = field(default_factory=dict)


@dataclass
class StackIR:
    spec: StackSpec
    layers: int
    repeat_expr: sympy.Expr
    stream: str  # the carried stream
    input: Ref
    schedule: list[str]  # template per layer
    outputs: dict[str, Ref]  # template -> its block output
    first_layer: int = 0  # checkpoint index of the stack's first layer


@dataclass
class StreamIR:
    """An internal or append stream of a stack after expansion: the layers that produce
    (internal) or archive (append) it, and the nodes that read it."""

    spec: StreamSpec
    stack: str  # the stack that declares it
    carried: str  # that stack's carried stream (an append stream may archive it)
    layers: list[int] = field(default_factory=list)  # producing / archived layers (0-based in the stack)
    readers: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (uid, stack, template)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def from_carried(self) -> bool:
        return self.spec.source == self.carried

    def elements(self, program: Program, stack: str | None, layer: int | None) -> list[int]:
        """The producing / archived layers a reader in layer ``layer`` of ``stack`` reads
        (``stack`` None: a model-graph node after the stacks; another stack: runs later)."""
        same = stack == self.stack
        if self.spec.kind == "internal":
            return [i for i in self.layers if not same or i < layer][-1:]  # the latest value
        if self.spec.read == "each":
            order = self.reading_layers(program)
            k = order.index((stack, layer)) if (stack, layer) in order else len(self.layers)
            return self.layers[k : k + 1]
        return self.layers if not same else self.history(layer)

    def history(self, layer: int) -> list[int]:
        """Archived layers a later layer ``layer`` of the archiving stack can read: archived
        after an earlier layer, or before this one or an earlier one."""
        return [i for i in self.layers if (i < layer if self.spec.at == "after" else i <= layer)]

    def reading_layers(self, program: Program) -> list[tuple[str | None, int | None]]:
        """Every (stack, layer) with a reader, in run order (stacks in graph order)."""
        order = list(program.stacks)
        seen = {
            (stack, layer)
            for _, stack, template in self.readers
            for layer in (program.template_layer_list(stack, template) if stack else [None])
        }
        return sorted(seen, key=lambda sl: (order.index(sl[0]) if sl[0] in order else len(order), sl[1] or 0))


@dataclass
class Program:
    """One phase of a model: nodes in dataflow order, stacks with their schedules."""

    model: ModelSpec
    phase: str
    nodes: list[IRNode]
    stacks: dict[str, StackIR]
    outputs: dict[str, Ref]  # model graph name -> ref
    streams: dict[str, StreamIR] = field(default_factory=dict)  # internal and append streams by name

    def template_layers(self, stack: str, template: str) -> int:
        return self.stacks[stack].schedule.count(template)

    def template_layer_list(self, stack: str, template: str | None) -> list[int]:
        return [i for i, t in enumerate(self.stacks[stack].schedule) if t == template]

    def is_carried(self, ref: Ref) -> bool:
        return ref.kind == "stream" and ref.stream == self.stacks[ref.name].stream

    def stream_reads(self, ref: Ref, node: IRNode) -> list[tuple[int | None, list[Ref]]]:
        """What ``node`` reads through the stream ``ref``: for each layer it runs in (None
        outside any stack), the values (refs) of the layers it reads, in archive order."""
        stream = self.streams[ref.stream]
        layers = self.template_layer_list(node.stack, node.template) if node.stack else [None]
        return [
            (j, [r for i in stream.elements(self, node.stack, j) if (r := self.element_ref(stream, i))]) for j in layers
        ]

    def element_ref(self, stream: StreamIR, layer: int) -> Ref | None:
        """The value a stream holds from layer ``layer`` of its stack."""
        st = self.stacks[stream.stack]
        if stream.from_carried:
            if stream.spec.at == "before":  # entering the layer: the previous layer's output
                return st.input if layer == 0 else st.outputs.get(st.schedule[layer - 1])
            return st.outputs.get(st.schedule[layer])
        return Ref("node", f"{stream.stack}/{st.schedule[layer]}/{stream.spec.source}")


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


class _Expander:
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
                    _add(
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
                _add(self.col, fill.where, message, hint=hint)
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
            _add(
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
                fill = fills.get(node.slot)
                if fill is None:
                    _add(
                        self.col,
                        where,
                        f"slot '{node.slot}' of '{comp.name}' is not filled",
                        hint=f"add '{node.slot}: <component>' to the model's components or to this template",
                    )
                    continue
                sub = self.component(fill)
                if sub is None:
                    continue
                accepted = comp.slots.get(node.slot, [])
                if accepted and sub.role not in accepted:
                    _add(
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
                    _add(
                        self.col,
                        fill.where,
                        f"component '{sub.name}' fills a slot, so it must have exactly one output",
                        expected="1 output",
                        got=str(sub.outputs),
                    )
                if sub.outputs and sub.outputs[0] in outs:
                    scope[name] = outs[sub.outputs[0]]
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

    # -- streams ----------------------------------------------------------------------
    def stream_ref(self, name: str, comp: ComponentSpec, stack: str | None) -> Ref | None:
        """The stream a component reads by name: declared on its own stack or on one that ran."""
        where = comp.where.get("reads", Where(comp.file, None, None, "$.reads"))
        if name not in self.declared:
            carried = {
                n for st in self.model.stacks.values() for n, ss in st.stream_specs.items() if ss.kind == "carried"
            }
            if name in carried:
                _add(
                    self.col,
                    where,
                    f"component '{comp.name}' reads the carried stream '{name}', which enters a block as its input",
                    hint="'reads:' names a stack's internal or append streams; the carried value is the first input",
                )
                return None
            message, hint = unknown_name("stream", name, self.declared)
            _add(
                self.col,
                where,
                f"component '{comp.name}' reads {message}",
                hint=(hint if self.declared else "no stack declares streams besides its carried one")
                + f"; declare it on the stack: streams: {{ {name}: {{ from: <slot.node path>, src: … }} }}",
            )
            return None
        owner = self.declared[name][0].name
        if owner != stack and owner not in self.expanded_stacks:
            _add(
                self.col,
                where,
                f"component '{comp.name}' (stack '{stack}') reads stream '{name}' of stack '{owner}', which runs later",
                hint=f"a stream is read after its stack runs: put stack '{owner}' before '{stack}' in the model graph",
            )
            return None
        return Ref("stream", owner, name)

    def stream_layers(self, spec: StreamSpec, layers: int, stack: str) -> list[int] | None:
        """The layers an append stream archives: [i, …], 'a:b[:step]', 'all' or {every: k}."""
        raw = spec.layers
        where = spec.keys_where.get(spec.at, spec.where)
        if raw == "all":
            return list(range(layers))
        if isinstance(raw, dict) and set(raw) == {"every"}:
            k = self.bound_int(str(raw["every"]))
            if k is not False and k > 0:
                return list(range(k - 1, layers, k)) if spec.at == "after" else list(range(0, layers, k))
            idx = None
        elif _is_config_list(raw):
            idx = self.config_layers(raw, where)
            if idx is None:
                return None
        else:
            idx = _layer_indices(raw, layers, self.bound_int)
        if idx is None:
            _add(
                self.col,
                where,
                f"stream '{spec.name}': '{spec.at}:' takes the layers to archive",
                expected="[i, …], 'a:b[:step]', all, {every: k} (every k-th layer) or {from: config.<list>, base: 0|1}",
                got=type_name(raw),
            )
            return None
        bad = [i for i in idx if not 0 <= i < layers]
        twice = sorted({i for i in idx if idx.count(i) > 1})
        if bad or twice:
            _add(
                self.col,
                where,
                f"stream '{spec.name}' archives "
                + (f"layer {bad[0]}, outside 0..{layers - 1} of stack '{stack}'" if bad else f"layer {twice[0]} twice"),
                expected=f"distinct layers in 0..{layers - 1}",
                got=str(bad[0] if bad else twice[0]),
            )
            return None
        return sorted(idx)

    def config_layers(self, raw: dict, where: Where) -> list[int] | None:
        """``{from: config.<list of layer numbers>, base: b}``: the layers a config lists by
        number (``base: 1`` when the config counts layers from 1, as Kimi-K3's
        linear_attn_config.full_attn_layers does), as 0-based indices.  The config stays the
        one source of the numbers."""
        from archsql.schema.expr import eval_binding

        form = "{from: config.<list of layer numbers>, base: 0 | 1}"
        if set(raw) - {"from", "base"} or not str(raw.get("from", "")).startswith("config."):
            _add(self.col, where, f"layers from the config are {form}", got=", ".join(sorted(map(str, raw))))
            return None
        base = raw.get("base", 0)
        if base not in (0, 1) or isinstance(base, bool):
            _add(
                self.col,
                where,
                "base: is the number the config gives the first layer",
                expected="0 or 1",
                got=repr(base),
            )
            return None
        try:
            values = eval_binding(raw["from"], self.config)
        except KeyError as exc:
            key, hint = exc.args
            _add(self.col, where, f"config key '{key}' is missing", hint=hint)
            return None
        if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            _add(
                self.col,
                where,
                f"{raw['from']} must be a list of layer numbers",
                expected="a list of integers",
                got=type_name(values),
            )
            return None
        return [v - base for v in values]

    def history_streams(self, stack: str, reads) -> list[str]:
        """Append streams of ``stack`` read whole (all / concat) by the reads given: their
        length grows with the reading layer."""
        names = {r[1] for r in reads}
        return sorted(
            n
            for n in names
            if n in self.streams and self.streams[n].stack == stack and self.streams[n].spec.read in ("all", "concat")
        )

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
                _add(self.col, where[dim], message, hint=f"{hint} (new dims are declared in archsql/specs/dims.yaml)")
                continue
            try:
                parse_dim_expr(value, self.symbols)
            except ExprSyntaxError as exc:
                _add(
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
                _add(
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
            _add(
                self.col,
                model.templates_where[unused[0]],
                f"template '{unused[0]}' is declared but no stack schedules it",
                hint="remove it or add it to a schedule",
            )
        program = Program(model, self.phase, self.nodes, stacks, outputs, self.streams)
        if not self.col.issues:
            for stream in self.streams.values():
                if stream.stack in stacks and stacks[stream.stack].layers:
                    self.check_stream(program, stream)
        if not self.col.issues:
            program.nodes = self.dataflow_order(program)
        return program

    def check_stream(self, program: Program, stream: StreamIR) -> None:
        """Producers, readers and their layers: a stream nobody produces or reads, a reader
        before any producer, a read: each with more readers than elements — located at the
        stream's declaration in the model."""
        spec, st = stream.spec, program.stacks[stream.stack]
        at = spec.keys_where.get

        def issue(key: str, message: str, **kw) -> None:
            _add(self.col, at(key, spec.where), message, **kw)

        uids = {n.uid for n in self.nodes}
        stream.readers = list(dict.fromkeys((u, stk, t) for u, name, stk, t in self.reads if name == spec.name))
        if stream.from_carried:
            if spec.kind == "internal":
                issue(
                    "from",
                    f"stream '{spec.name}' reads the carried stream '{stream.carried}', which every layer already "
                    "passes to the next: to read chosen layers' values later, archive them",
                    hint=f"use an append stream: {{ from: {stream.carried}, after: [i, …], read: each | all | concat }}",
                )
                return
        else:
            templates = list(dict.fromkeys(st.schedule))
            producers = [t for t in templates if f"{stream.stack}/{t}/{spec.source}" in uids]
            if not producers:
                paths = {n.uid.split("/", 2)[2] for n in self.nodes if n.stack == stream.stack}
                issue(
                    "from",
                    f"stream '{spec.name}' has no producer: no template of stack '{stream.stack}' has node "
                    f"'{spec.source}'",
                    hint=did_you_mean(spec.source, paths)
                    or "from: names a node as <slot>.<node>, its uid without '<stack>/<template>/' "
                    "(e.g. self_attn.index_topk), or the carried stream",
                )
                return
            if spec.at == "before":
                issue(
                    "before",
                    f"stream '{spec.name}' archives node '{spec.source}' at layer entry, before the node runs",
                    hint=f"'before:' archives the carried stream ({stream.carried}) entering a layer; "
                    "a node's value is archived with 'after: [i, …]'",
                )
                return
            if spec.kind == "internal":
                stream.layers = [i for i, t in enumerate(st.schedule) if t in producers]
            missing = [i for i in stream.layers if st.schedule[i] not in producers]
            if missing:
                issue(
                    spec.at,
                    f"stream '{spec.name}' archives layer {missing[0]}, whose template '{st.schedule[missing[0]]}' "
                    f"has no node '{spec.source}'",
                    hint=f"archive only layers of templates {', '.join(producers)}",
                )
                return
        if not stream.readers:
            issue(
                "from",
                f"stream '{spec.name}' has no reader",
                hint=f"read it in a component ('reads: [{spec.name}]' and 'in: [..., {spec.name}]') or in the model "
                f"graph ('in: <stack node>.{spec.name}'), or remove it",
            )
            return
        name = spec.name
        if spec.kind == "internal":
            for _, stack, template in stream.readers:
                if stack != stream.stack:
                    continue
                for j in program.template_layer_list(stack, template):
                    if not stream.elements(program, stack, j):
                        first = stream.layers[0]
                        issue(
                            "from",
                            f"layer {j} (template '{template}') of stack '{stack}' reads stream '{name}' before any "
                            f"layer produces it (first producer: layer {first}, template '{st.schedule[first]}')",
                            hint="an internal stream is read by a LATER layer: schedule a producing template first, "
                            "or give the early layers a template that produces its own value",
                        )
                        return
            return
        archived = ", ".join(map(str, stream.layers))
        if spec.read == "each":
            outside = [u for u, stack, _ in stream.readers if stack is None]
            if outside:
                issue(
                    "read",
                    f"node '{outside[0]}' reads stream '{name}' (read: each) outside any stack",
                    hint="read: each gives the j-th archived element to the j-th reading layer; a model-graph node "
                    "reads the whole archive: read: concat or read: all",
                )
                return
            order = stream.reading_layers(program)
            n, m = len(order), len(stream.layers)
            if n != m:
                issue(
                    "read",
                    f"stream '{name}' (read: each) is read by {n} layer(s) but archives {m} element(s)"
                    + (f" ({spec.at} layers {archived})" if m else ""),
                    expected=f"{m} reading layer(s), the j-th reading the j-th element",
                    got=f"{n} reading layers: " + ", ".join(f"{stk} {j}" for stk, j in order[:8]),
                    hint=(
                        f"archive one element per reading layer ({spec.at}: [i, …] with {n} layers), "
                        "or read the whole archive: read: all | concat"
                        if n > m
                        else f"archive only what is read ({spec.at}: [i, …] with {n} layers)"
                    ),
                )
                return
            for (stack, j), i in zip(order, stream.layers, strict=True):
                if stack == stream.stack and (i >= j if spec.at == "after" else i > j):
                    issue(
                        "read",
                        f"layer {j} of stack '{stack}' reads element {order.index((stack, j))} of stream '{name}', "
                        f"archived {spec.at} layer {i}, which has not run yet",
                        hint="the j-th reading layer must come after the j-th archived layer",
                    )
                    return
            return
        for _, stack, template in stream.readers:
            if stack != stream.stack:
                continue
            for j in program.template_layer_list(stack, template):
                if not stream.elements(program, stack, j):
                    issue(
                        spec.at,
                        f"layer {j} (template '{template.split('@')[0]}') of stack '{stack}' reads stream '{name}' "
                        f"(read: {spec.read}) before anything is archived ({spec.at} layers {archived})",
                        hint=f"archive a layer before the first reader ({spec.at}: [i, …]), or schedule "
                        "a template that does not read it for the early layers",
                    )
                    return

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
            _add(
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
            _add(self.col, node.where, message, hint=hint or "declare it under 'stacks:'")
            return None
        if not inputs:
            _add(
                self.col,
                node.where,
                "a stack node reads its carried stream's initial value first (then values every layer reads)",
                expected="in: [initial value, ...]",
                got="no input",
            )
            return None
        carried = [n for n, st in spec.stream_specs.items() if st.kind == "carried"]
        if not carried:
            _add(
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
            _add(
                self.col,
                spec.keys_where.get("repeat", spec.where),
                f"repeat of stack '{spec.name}': {exc}",
                expected="a dim expression over declared dims",
                got=repr(spec.repeat),
            )
            return None
        if not layers.is_Integer or int(layers) < 0:
            missing = sorted(str(s) for s in layers.free_symbols)
            _add(
                self.col,
                spec.keys_where.get("repeat", spec.where),
                f"repeat of stack '{spec.name}' must bind to an integer >= 0",
                expected="an integer >= 0 (0: the stack is absent, e.g. no MTP layers)",
                got=str(layers),
                hint=f"bind {', '.join(missing)} under dims: — dims are never defaulted" if missing else None,
            )
            return None
        layers = int(layers)
        self.scheduled |= _templates_named(spec.schedule)
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
            _add(
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
            _add(
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

    def bound_int(self, text: str):
        """A dim expression bound to an integer, or False."""
        try:
            value = parse_dim_expr(text.strip(), self.symbols).xreplace(
                {self.symbols[k]: sympy.Integer(v) for k, v in self.dims.items()}
            )
        except ExprSyntaxError:
            return False
        return int(value) if value.is_Integer else False

    def schedule_from_config(self, spec: StackSpec, raw: dict, layers: int, where: Where) -> list[str] | None:
        """``{from: config.<per-layer list or pattern string>, map: {value: template}}``: one
        template per listed value; every value the config lists must be mapped.  ``from:`` may
        list several per-layer lists (e.g. attention type and dense/MoE); a layer's value is
        then its values joined by ',' (``map: {"0,1": full_moe}``)."""
        from archsql.schema.expr import eval_binding

        keys = set(raw)
        if keys != {"from", "map"} or not isinstance(raw.get("map"), dict):
            _add(
                self.col,
                where,
                "a schedule from the config is {from: config.<list> (or a list of them), map: {value: template}}",
                got=", ".join(sorted(map(str, keys))),
            )
            return None
        sources = raw["from"] if isinstance(raw["from"], list) else [raw["from"]]
        label = " × ".join(map(str, sources))
        columns = []
        for source in sources:
            try:
                values = eval_binding(source, self.config) if str(source).startswith("config.") else None
            except KeyError as exc:
                key, hint = exc.args
                _add(self.col, where, f"config key '{key}' is missing", hint=hint)
                return None
            if isinstance(values, str):
                values = list(values)
            if not isinstance(values, list):
                _add(
                    self.col,
                    where,
                    "schedule 'from:' must name a per-layer list (or pattern string) of the config",
                    got=type_name(values),
                )
                return None
            if len(values) != layers:
                _add(
                    self.col,
                    where,
                    f"{source} lists {len(values)} layers, the stack repeats {layers}",
                    expected=str(layers),
                    got=str(len(values)),
                )
                return None
            columns.append(values)
        values = [",".join(str(v) for v in row) for row in zip(*columns, strict=True)]
        mapping = {str(k): v for k, v in raw["map"].items()}
        missing = sorted({str(v) for v in values} - set(mapping))
        if missing:
            _add(
                self.col,
                where,
                f"schedule does not cover config value(s) {', '.join(map(repr, missing))} of {label}",
                hint="map every value the config lists to a template: "
                + ", ".join(f"{m!r}: <template>" for m in missing),
            )
            return None
        unknown = sorted({t for t in mapping.values() if t not in self.model.templates})
        if unknown:
            message, hint = unknown_name("template", unknown[0], self.model.templates)
            _add(self.col, where, message, hint=hint)
            return None
        return [mapping[str(v)] for v in values]

    def schedule(self, spec: StackSpec, layers: int) -> list[str] | None:
        templates = self.model.templates
        raw = spec.schedule
        where = spec.keys_where.get("schedule", spec.where)
        result: list[str | None] = [None] * layers
        if isinstance(raw, dict):
            return self.schedule_from_config(spec, raw, layers, where)
        entries = [{"template": raw, "layers": f"0:{layers}"}] if isinstance(raw, str) else raw
        if not isinstance(entries, list):
            _add(
                self.col,
                where,
                "schedule must be a template name or a list of {template, layers}",
                expected="string or list",
                got=type_name(raw),
            )
            return None
        ok = True
        # `layers: rest` takes every layer no other entry names (so it is filled last)
        for i, entry in sorted(enumerate(entries), key=lambda e: _is_rest(e[1])):
            p = f"{where.path}[{i}]" if not isinstance(raw, str) else where.path
            line, column = raw.item_pos(i) if isinstance(raw, LocList) else (where.line, where.column)
            at = Where(getattr(raw, "file", None) or where.file, line, column, p)
            if not isinstance(entry, dict) or set(entry) - {"template", "layers"} or "template" not in entry:
                _add(
                    self.col,
                    at,
                    "a schedule entry maps template and layers",
                    expected="{template: NAME, layers: [i, …] | 'a:b'}",
                    got=type_name(entry),
                )
                ok = False
                continue
            tname = entry["template"]
            if tname not in templates:
                message, hint = unknown_name("template", str(tname), templates)
                _add(self.col, at, message, hint=hint)
                ok = False
                continue
            if _is_rest(entry):
                idx = [layer for layer, t in enumerate(result) if t is None]
            elif _is_config_list(entry.get("layers")):
                idx = self.config_layers(entry["layers"], Where(at.file, at.line, at.column, f"{p}.layers"))
                if idx is None:
                    ok = False
                    continue
            else:
                idx = _layer_indices(entry.get("layers", f"0:{layers}"), layers, self.bound_int)
            if idx is None:
                _add(
                    self.col,
                    Where(at.file, at.line, at.column, f"{p}.layers"),
                    "layers must be a list of layer indices, a slice 'a:b', a config list or 'rest'",
                    expected="[i, …], 'a:b[:step]', {from: config.<index list>, base: 0|1} "
                    "or 'rest' (every layer no other entry names)",
                    got=type_name(entry.get("layers")),
                )
                ok = False
                continue
            for layer in idx:
                if not 0 <= layer < layers:
                    _add(
                        self.col,
                        at,
                        f"layer {layer} is outside 0..{layers - 1}",
                        expected=f"0..{layers - 1}",
                        got=str(layer),
                    )
                    ok = False
                elif result[layer] is not None:
                    _add(
                        self.col,
                        at,
                        f"layer {layer} is scheduled twice ({result[layer]} and {tname})",
                        hint="every layer needs exactly one template",
                    )
                    ok = False
                else:
                    result[layer] = tname
        missing = [i for i, t in enumerate(result) if t is None]
        if ok and missing:
            _add(
                self.col,
                where,
                f"schedule of stack '{spec.name}' does not cover layers {_ranges(missing)}",
                expected=f"layers 0..{layers - 1} (repeat = {layers})",
                got=f"{layers - len(missing)} scheduled",
                hint="every layer needs exactly one template; add an entry for the missing layers",
            )
            ok = False
        return result if ok else None  # type: ignore[return-value]


def stack_stream_names(model: ModelSpec) -> dict[str, list[str]]:
    """Model-graph stack node → the internal / append streams its stack declares (read in
    the model graph as ``<stack node>.<stream>``)."""
    out: dict[str, list[str]] = {}
    for name, node in model.graph.items():
        st = model.stacks.get(node.stack) if node.stack else None
        if st is not None:
            out[name] = [n for n, ss in st.stream_specs.items() if ss.kind != "carried"]
    return out


def _templates_named(raw: Any) -> set[str]:
    """Template names a schedule spec mentions (string, entries, or a config map)."""
    if isinstance(raw, str):
        return {raw}
    if isinstance(raw, dict) and isinstance(raw.get("map"), dict):
        return {str(v) for v in raw["map"].values()}
    if isinstance(raw, list):
        return {str(e.get("template")) for e in raw if isinstance(e, dict)}
    return set()


def _is_rest(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("layers") == "rest"


def _is_config_list(raw: Any) -> bool:
    return isinstance(raw, dict) and "from" in raw


def _layer_indices(raw: Any, layers: int, bound_int) -> list[int] | None:
    """A list of indices, or a slice 'a:b[:step]' whose bounds are dim expressions
    (e.g. '0:first_k_dense', 'first_k_dense:')."""
    if isinstance(raw, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        return list(raw)
    if isinstance(raw, str) and raw.count(":") in (1, 2):
        bounds = [bound_int(b) if b.strip() else None for b in raw.split(":")]
        if any(b is False for b in bounds):
            return None
        return list(range(layers))[slice(*bounds)]
    return None


def _ranges(idx: list[int]) -> str:
    return ", ".join(str(i) for i in idx[:8]) + (" …" if len(idx) > 8 else "")


def _default_role(node: NodeSpec) -> str | None:
    from archsql.evaluator.primitives.base import registry

    prim = registry().get(node.op or "")
    return prim.default_role if prim else None


def expand(model: ModelSpec, library, dims: dict[str, int], phase: str, col: Collector, config=None) -> Program:
    """SpecIR for one phase; issues go to ``col``."""
    return _Expander(model, library, dims, phase, col, config or {}).run()


__all__ = ["IRNode", "Issue", "Program", "Ref", "StackIR", "StreamIR", "did_you_mean", "expand", "stack_stream_names"]
