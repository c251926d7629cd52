"""propagate_layouts: how every tensor is split across parallel groups, and the
collectives that keeps it correct.  One pass per phase over a walked Program.

On each parallel group (``attention``, ``ffn``, ``moe_tp``, ``moe_ep`` from the dims
table's ``shardable_by``, plus ``dp`` for data parallelism over requests) a tensor axis is
Sharded or Replicated, and a whole tensor may be Partial (its values are pending sums).
Weights are placed by their ``weight_axes``; activations follow the primitive's DimMap —
the same object shape inference reads: a copied axis keeps its sharding, a split axis
puts it on its outermost part, a merged axis carries the outermost sharded part, a new
axis from a weight takes the weight axis's placement, and a contracted axis sharded on
both sides makes the output Partial.  Where a consumer cannot take what it is given, a
collective is inferred: Partial → Replicated is an all-reduce, a sharded axis the op
needs whole is an all-gather, tokens sent to experts on other devices (dispatch/combine)
are an all-to-all.  Nobody writes "all-reduce after o_proj": it falls out.

Nothing here depends on degrees: a layout says *which* group splits an axis; the
deployments table says by how much (degree 1 makes every collective free).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from archsql.evaluator.dimmap import Flatten, InputDim, NewDim, Singleton, Split
from archsql.evaluator.primitives.base import Ctx, get_primitive
from archsql.evaluator.walk import NodeResult, Walk

DP = "dp"  # data parallelism over requests (the batch axis of model inputs)
EP = "moe_ep"


@dataclass(frozen=True)
class Layout:
    """Placement of one tensor: sharded axes (axis → group) and pending-sum groups."""

    sharded: tuple[tuple[int, str], ...] = ()
    partial: frozenset[str] = frozenset()

    def group_of(self, axis: int) -> str | None:
        return dict(self.sharded).get(axis)

    def text(self, rank: int) -> str:
        """``[S(dp), R, S(attention)] + P(sum: attention)``: the round-trippable text form."""
        groups = dict(self.sharded)
        body = "[" + ", ".join(f"S({groups[a]})" if a in groups else "R" for a in range(rank)) + "]"
        return body + (f" P(sum: {', '.join(sorted(self.partial))})" if self.partial else "")


REPLICATED = Layout()


@dataclass(frozen=True)
class Collective:
    kind: str  # all_reduce | all_gather | all_to_all
    group: str
    port: int  # which input of the consumer it prepares
    elements: sympy.Expr  # global elements of the tensor communicated (symbolic)


@dataclass
class NodeLayout:
    out: Layout
    weights: dict[str, Layout] = field(default_factory=dict)
    collectives: list[Collective] = field(default_factory=list)
    copies_group: str | None = None  # routed experts: their copies are spread over EP
    # whole pieces a sharded axis is cut into (heads, experts' rows …): (tensor, axis) → parts.
    # A device holds ceil(parts / degree) of them — the `fit` rule when parts do not divide.
    parts: dict[tuple[str, int], int | None] = field(default_factory=dict)


def parse_layout(text: str) -> Layout:
    """Inverse of :meth:`Layout.text`; a malformed text raises ValueError."""
    body, _, partial = text.partition(" P(sum: ")
    if not (body.startswith("[") and body.endswith("]")) or (partial and not partial.endswith(")")):
        raise ValueError(f"not a layout: {text!r} (expected e.g. '[S(dp), R, S(attention)] P(sum: ffn)')")
    sharded = []
    for axis, item in enumerate(body[1:-1].split(", ")):
        if item.startswith("S(") and item.endswith(")") and len(item) > 3:
            sharded.append((axis, item[2:-1]))
        elif item != "R":
            raise ValueError(f"not a placement: {item!r} in {text!r} (expected R or S(group))")
    groups = frozenset(g.strip() for g in partial.rstrip(")").split(",")) if partial else frozenset()
    return Layout(tuple(sharded), groups)


def _numel(res_shape) -> sympy.Expr:
    return sympy.Mul(*(a.expr for a in res_shape))


def weight_placements(res: NodeResult, walk: Walk) -> tuple[dict[str, Layout], dict[tuple[str, int], int | None]]:
    """Weight placements from the node's weight_axes and the bound ``parts`` of each split
    axis, keyed (tensor, axis).  The main weight takes weight_axes; a one-axis sibling (a
    bias) follows the main weight's axis 0; anything else is replicated."""
    from archsql.schema.expr import RUNTIME_SYMBOLS, ExprSyntaxError, parse_dim_expr

    raw = getattr(res.node.spec, "weight_axes", None) or []
    symbols = {str(k): k for k in walk.binding} | RUNTIME_SYMBOLS
    main: list[tuple[int, str]] = []
    main_parts: dict[int, int | None] = {}
    for axis, entry in enumerate(raw):
        if isinstance(entry, dict) and "world" in entry:
            main.append((axis, entry["world"]))
            try:
                value = parse_dim_expr(entry.get("parts", 0), symbols).xreplace(walk.binding)
            except ExprSyntaxError:
                value = None
            main_parts[axis] = int(value) if value is not None and value.is_Integer else None
    layouts: dict[str, Layout] = {}
    parts: dict[tuple[str, int], int | None] = {}
    for decl in res.weights:
        if decl.tensor == res.weights[0].tensor:
            layouts[decl.tensor] = Layout(tuple(main))
            parts.update({(decl.tensor, axis): p for axis, p in main_parts.items()})
        elif len(decl.axes) == 1 and 0 in main_parts:
            layouts[decl.tensor] = Layout(((0, dict(main)[0]),))
            parts[(decl.tensor, 0)] = main_parts[0]
        else:
            layouts[decl.tensor] = REPLICATED
    return layouts, parts


def _size(axis) -> int | None:
    return int(axis.value) if axis.value.is_Integer else None


def propagate(walk: Walk) -> dict[str, NodeLayout]:
    """Layouts of every node output and weight, with the inferred collectives."""
    program = walk.program
    results = walk.results
    layouts: dict[str, NodeLayout] = {}
    stream_in: dict[str, Layout] = {}

    def layout_of(ref, node) -> Layout:
        if ref.kind == "input":
            return Layout(((0, DP),))  # requests are split over data-parallel ranks
        if ref.kind == "node":
            return layouts[ref.name].out if ref.name in layouts else REPLICATED
        st = program.stacks[ref.name]
        if ref.stream != st.stream:  # internal / append stream: as its first value, history axis inserted
            return _stream_layout(ref, node)
        if node.stack == ref.name:
            return stream_in.setdefault(ref.name, layout_of(st.input, node))
        return layout_of(st.input, node) if not st.schedule else _residual(layout_of(st.input, node))

    def _stream_layout(ref, node) -> Layout:
        reads = [e for _, refs in program.stream_reads(ref, node) for e in refs]
        if not reads:
            return REPLICATED
        lay = layout_of(reads[0], node)
        spec = program.streams[ref.stream].spec
        rank = len(results[reads[0].name].shape) if reads[0].kind == "node" and reads[0].name in results else None
        if spec.read == "all" and rank is not None:  # the new history axis shifts the axes after it
            shape = results[reads[0].name].shape
            pos = sum(1 for a in shape if a.runtime) if spec.axis is None else spec.axis % (rank + 1)
            return Layout(tuple((a + (a >= pos), g) for a, g in lay.sharded), lay.partial)
        if spec.read == "concat" and rank is not None:  # the joined axis is whole
            join = (spec.axis if spec.axis is not None else -1) % rank
            return Layout(tuple((a, g) for a, g in lay.sharded if a != join), lay.partial)
        return lay

    def _parts_of(ref) -> dict[int, int | None]:
        if ref.kind == "node" and ref.name in layouts:
            return {axis: p for (tensor, axis), p in layouts[ref.name].parts.items() if tensor == "out"}
        return {}

    for uid, res in results.items():
        node = res.node
        prim = get_primitive(node.op)()
        ctx = Ctx(res.params, res.ins, uid, out=res.shape, phase=program.phase)
        ins = [layout_of(ref, node) for ref in node.inputs]
        collectives: list[Collective] = []
        weights, weight_axis_parts = weight_placements(res, walk)
        contraction = prim.contraction(ctx)

        # 1. pending sums must be reduced unless the op is linear in that input
        for port, lay in enumerate(ins):
            if lay.partial and not (prim.partial_passes or (node.op == "add" and _all_partial_alike(ins))):
                for g in sorted(lay.partial):
                    collectives.append(Collective("all_reduce", g, port, _numel(res.ins[port])))
                ins[port] = Layout(lay.sharded)
        # 2. axes the op reduces over must be whole
        if prim.needs_whole_last_axis:
            for port, lay in enumerate(ins):
                last = len(res.ins[port]) - 1
                g = lay.group_of(last)
                if g is not None:
                    collectives.append(Collective("all_gather", g, port, _numel(res.ins[port])))
                    ins[port] = Layout(tuple((a, h) for a, h in lay.sharded if a != last), lay.partial)
        partial = set().union(*(lay.partial for lay in ins)) if ins else set()
        # 3. contraction with a sharded weight
        weight_out: dict[int, str] = {}
        if contraction is not None and res.weights:
            w = weights[res.weights[0].tensor]
            for out_axis, w_axis in contraction.out_axes.items():
                if w.group_of(w_axis):
                    weight_out[out_axis] = w.group_of(w_axis)
            for port, in_axis, w_axis in contraction.contracted:
                g_in, g_w = ins[port].group_of(in_axis), w.group_of(w_axis)
                if g_w is not None:
                    partial.add(g_w)  # the local slice of the input meets the local slice of the weight
                    if g_in is not None and g_in != g_w:
                        collectives.append(Collective("all_gather", g_in, port, _numel(res.ins[port])))
                elif g_in is not None:
                    collectives.append(Collective("all_gather", g_in, port, _numel(res.ins[port])))
            for w_axis in contraction.reduced_weight_axes:
                if w.group_of(w_axis):
                    partial.add(w.group_of(w_axis))
        # 4. routed experts: tokens travel to the devices holding their experts and back
        copies_group = None
        if node.op == "dispatch":
            collectives.append(Collective("all_to_all", EP, 0, _numel(res.shape)))
        if node.op == "combine":
            collectives.append(Collective("all_to_all", EP, 0, _numel(res.ins[0])))
        if res.copies != 1:
            copies_group = EP
        # 5. the output layout through the DimMap (with the whole parts each split axis has)
        sharded = []
        parts: dict[tuple[str, int], int | None] = dict(weight_axis_parts)
        in_parts = [_parts_of(ref) for ref in node.inputs]
        w_tensor = res.weights[0].tensor if res.weights else None
        for out_axis, spec in enumerate(prim.dimmap(ctx)):
            g, p = None, _size(res.shape[out_axis])
            if isinstance(spec, InputDim):
                g = ins[spec.port].group_of(spec.axis)
                p = in_parts[spec.port].get(spec.axis, p)
            elif isinstance(spec, Split):
                g = ins[spec.port].group_of(spec.axis) if spec.index == 0 else None
            elif isinstance(spec, Flatten):
                a = next((a for a in spec.axes if ins[spec.port].group_of(a)), None)
                g = ins[spec.port].group_of(a) if a is not None else None
                p = in_parts[spec.port].get(a, _size(res.ins[spec.port][a])) if a is not None else p
            elif isinstance(spec, NewDim | Singleton):
                g = weight_out.get(out_axis)
                if g is not None and contraction is not None:
                    p = parts.get((w_tensor, contraction.out_axes[out_axis]), p)
            if node.op == "dispatch" and g == DP:
                g = None  # experts see every rank's tokens after the all-to-all
            if g is not None:
                sharded.append((out_axis, g))
                parts[("out", out_axis)] = None if g == DP else p
        if node.op == "combine":  # tokens come back to their own data-parallel rank
            sharded = [(a, g) for a, g in sharded if a != 0] + [(0, DP)]
        layouts[uid] = NodeLayout(
            Layout(tuple(sorted(sharded)), frozenset(partial)), weights, collectives, copies_group, parts
        )
    return layouts


def _all_partial_alike(ins: list[Layout]) -> bool:
    return len({lay.partial for lay in ins}) == 1 and bool(ins[0].partial)


def _residual(lay: Layout) -> Layout:
    return Layout(lay.sharded)
