"""The SpecIR: what ``expand`` makes of a model spec, once per phase.

A :class:`Program` is one phase of a model: its nodes (:class:`IRNode`, in dataflow order,
inputs as :class:`Ref` to producer uids, model inputs or a stack's stream), its stacks
(:class:`StackIR`: the layer schedule of a repeated block) and its internal / append
streams (:class:`StreamIR`).  See docs/specir.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from archsql.schema.spec import CacheEntry, ModelSpec, NodeSpec, StackSpec, StreamSpec, Where


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
