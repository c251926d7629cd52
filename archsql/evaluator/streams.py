"""expand, streams: resolving what a component reads by name, the layers an append
stream archives, and the checks of producers and readers after expansion.

A stack declares internal streams (a node's value in one layer, read by a later layer: the
latest producing layer's value) and append streams (values archived on chosen layers, read
``each`` / ``all`` / ``concat``) besides its carried residual (docs/specir.md "Streams").
"""

from __future__ import annotations

from archsql.errors import did_you_mean, unknown_name
from archsql.evaluator.ir import Program, Ref, StreamIR
from archsql.evaluator.schedule import is_config_list, layer_indices
from archsql.schema.checks import add_issue, type_name
from archsql.schema.spec import ComponentSpec, ModelSpec, StreamSpec, Where


class StreamExpansion:
    """The stream steps of the expander (mixed into :class:`archsql.evaluator.expand._Expander`)."""

    def stream_ref(self, name: str, comp: ComponentSpec, stack: str | None) -> Ref | None:
        """The stream a component reads by name: declared on its own stack or on one that ran."""
        where = comp.where.get("reads", Where(comp.file, None, None, "$.reads"))
        if name not in self.declared:
            carried = {
                n for st in self.model.stacks.values() for n, ss in st.stream_specs.items() if ss.kind == "carried"
            }
            if name in carried:
                add_issue(
                    self.col,
                    where,
                    f"component '{comp.name}' reads the carried stream '{name}', which enters a block as its input",
                    hint="'reads:' names a stack's internal or append streams; the carried value is the first input",
                )
                return None
            message, hint = unknown_name("stream", name, self.declared)
            add_issue(
                self.col,
                where,
                f"component '{comp.name}' reads {message}",
                hint=(hint if self.declared else "no stack declares streams besides its carried one")
                + f"; declare it on the stack: streams: {{ {name}: {{ from: <slot.node path>, src: … }} }}",
            )
            return None
        owner = self.declared[name][0].name
        if owner != stack and owner not in self.expanded_stacks:
            add_issue(
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
        elif is_config_list(raw):
            idx = self.config_layers(raw, where)
            if idx is None:
                return None
        else:
            idx = layer_indices(raw, layers, self.bound_int)
        if idx is None:
            add_issue(
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
            add_issue(
                self.col,
                where,
                f"stream '{spec.name}' archives "
                + (f"layer {bad[0]}, outside 0..{layers - 1} of stack '{stack}'" if bad else f"layer {twice[0]} twice"),
                expected=f"distinct layers in 0..{layers - 1}",
                got=str(bad[0] if bad else twice[0]),
            )
            return None
        return sorted(idx)

    def history_streams(self, stack: str, reads) -> list[str]:
        """Append streams of ``stack`` read whole (all / concat) by the reads given: their
        length grows with the reading layer."""
        names = {r[1] for r in reads}
        return sorted(
            n
            for n in names
            if n in self.streams and self.streams[n].stack == stack and self.streams[n].spec.read in ("all", "concat")
        )

    def check_stream(self, program: Program, stream: StreamIR) -> None:
        """Producers, readers and their layers: a stream nobody produces or reads, a reader
        before any producer, a read: each with more readers than elements — located at the
        stream's declaration in the model."""
        spec = stream.spec
        stream.readers = list(dict.fromkeys((u, stk, t) for u, name, stk, t in self.reads if name == spec.name))
        if not self.check_producers(program, stream) or not self.check_has_readers(stream):
            return
        if spec.kind == "internal":
            self.check_internal_readers(program, stream)
        elif spec.read == "each":
            self.check_each_readers(program, stream)
        else:
            self.check_history_readers(program, stream)

    def stream_issue(self, spec: StreamSpec, key: str, message: str, **kw) -> None:
        add_issue(self.col, spec.keys_where.get(key, spec.where), message, **kw)

    def check_producers(self, program: Program, stream: StreamIR) -> bool:
        """A node of the stack produces the stream on every layer it archives (False: reported)."""
        spec, st = stream.spec, program.stacks[stream.stack]
        uids = {n.uid for n in self.nodes}
        if stream.from_carried:
            if spec.kind == "internal":
                self.stream_issue(
                    spec,
                    "from",
                    f"stream '{spec.name}' reads the carried stream '{stream.carried}', which every layer already "
                    "passes to the next: to read chosen layers' values later, archive them",
                    hint=f"use an append stream: {{ from: {stream.carried}, after: [i, …], read: each | all | concat }}",
                )
                return False
        else:
            templates = list(dict.fromkeys(st.schedule))
            producers = [t for t in templates if f"{stream.stack}/{t}/{spec.source}" in uids]
            if not producers:
                paths = {n.uid.split("/", 2)[2] for n in self.nodes if n.stack == stream.stack}
                self.stream_issue(
                    spec,
                    "from",
                    f"stream '{spec.name}' has no producer: no template of stack '{stream.stack}' has node "
                    f"'{spec.source}'",
                    hint=did_you_mean(spec.source, paths)
                    or "from: names a node as <slot>.<node>, its uid without '<stack>/<template>/' "
                    "(e.g. self_attn.index_topk), or the carried stream",
                )
                return False
            if spec.at == "before":
                self.stream_issue(
                    spec,
                    "before",
                    f"stream '{spec.name}' archives node '{spec.source}' at layer entry, before the node runs",
                    hint=f"'before:' archives the carried stream ({stream.carried}) entering a layer; "
                    "a node's value is archived with 'after: [i, …]'",
                )
                return False
            if spec.kind == "internal":
                stream.layers = [i for i, t in enumerate(st.schedule) if t in producers]
            missing = [i for i in stream.layers if st.schedule[i] not in producers]
            if missing:
                self.stream_issue(
                    spec,
                    spec.at,
                    f"stream '{spec.name}' archives layer {missing[0]}, whose template '{st.schedule[missing[0]]}' "
                    f"has no node '{spec.source}'",
                    hint=f"archive only layers of templates {', '.join(producers)}",
                )
                return False
        return True

    def check_has_readers(self, stream: StreamIR) -> bool:
        spec = stream.spec
        if not stream.readers:
            self.stream_issue(
                spec,
                "from",
                f"stream '{spec.name}' has no reader",
                hint=f"read it in a component ('reads: [{spec.name}]' and 'in: [..., {spec.name}]') or in the model "
                f"graph ('in: <stack node>.{spec.name}'), or remove it",
            )
            return False
        return True

    def check_internal_readers(self, program: Program, stream: StreamIR) -> None:
        """An internal stream is read by a later layer than its first producer."""
        spec, st = stream.spec, program.stacks[stream.stack]
        name = spec.name
        for _, stack, template in stream.readers:
            if stack != stream.stack:
                continue
            for j in program.template_layer_list(stack, template):
                if not stream.elements(program, stack, j):
                    first = stream.layers[0]
                    self.stream_issue(
                        spec,
                        "from",
                        f"layer {j} (template '{template}') of stack '{stack}' reads stream '{name}' before any "
                        f"layer produces it (first producer: layer {first}, template '{st.schedule[first]}')",
                        hint="an internal stream is read by a LATER layer: schedule a producing template first, "
                        "or give the early layers a template that produces its own value",
                    )
                    return

    def check_each_readers(self, program: Program, stream: StreamIR) -> None:
        """read: each — one archived element per reading layer, archived before it runs."""
        spec, name = stream.spec, stream.spec.name
        archived = ", ".join(map(str, stream.layers))
        outside = [u for u, stack, _ in stream.readers if stack is None]
        if outside:
            self.stream_issue(
                spec,
                "read",
                f"node '{outside[0]}' reads stream '{name}' (read: each) outside any stack",
                hint="read: each gives the j-th archived element to the j-th reading layer; a model-graph node "
                "reads the whole archive: read: concat or read: all",
            )
            return
        order = stream.reading_layers(program)
        n, m = len(order), len(stream.layers)
        if n != m:
            self.stream_issue(
                spec,
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
                self.stream_issue(
                    spec,
                    "read",
                    f"layer {j} of stack '{stack}' reads element {order.index((stack, j))} of stream '{name}', "
                    f"archived {spec.at} layer {i}, which has not run yet",
                    hint="the j-th reading layer must come after the j-th archived layer",
                )
                return

    def check_history_readers(self, program: Program, stream: StreamIR) -> None:
        """read: all / concat — every reading layer of the archiving stack sees an element."""
        spec, name = stream.spec, stream.spec.name
        archived = ", ".join(map(str, stream.layers))
        for _, stack, template in stream.readers:
            if stack != stream.stack:
                continue
            for j in program.template_layer_list(stack, template):
                if not stream.elements(program, stack, j):
                    self.stream_issue(
                        spec,
                        spec.at,
                        f"layer {j} (template '{template.split('@')[0]}') of stack '{stack}' reads stream '{name}' "
                        f"(read: {spec.read}) before anything is archived ({spec.at} layers {archived})",
                        hint=f"archive a layer before the first reader ({spec.at}: [i, …]), or schedule "
                        "a template that does not read it for the early layers",
                    )
                    return


def stack_stream_names(model: ModelSpec) -> dict[str, list[str]]:
    """Model-graph stack node → the internal / append streams its stack declares (read in
    the model graph as ``<stack node>.<stream>``)."""
    out: dict[str, list[str]] = {}
    for name, node in model.graph.items():
        st = model.stacks.get(node.stack) if node.stack else None
        if st is not None:
            out[name] = [n for n, ss in st.stream_specs.items() if ss.kind != "carried"]
    return out
