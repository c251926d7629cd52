"""propagate_layouts: how every tensor is split across parallel groups, and the
collectives that keeps it correct.  One pass per phase over a walked Program.

On each parallel group (``attention``, ``ffn``, ``moe_tp``, ``moe_ep`` from the dims
table's ``shardable_by``, plus ``dp`` for data parallelism over requests) a tensor axis is
Sharded or Replicated, and a whole tensor may be Partial (its values are pending sums).
Weights are placed by their ``weight_axes``; activations follow the primitive's DimMap —
the same object shape inference reads: a copied axis keeps its sharding, a split axis
puts it on its outermost part, a merged axis carries the outermost sharded part, a new
axis from a weight takes the weight axis's placement, and a contracted axis sharded on
both sides makes the output Partial.  A fused axis (weight_axes ``fused``: a projection's
output that is several tensors side by side) carries its segments, each cut into its own
whole pieces; a part of it (a slice, ``Part``) stays sharded when it is whole segments and
is gathered otherwise, as is an axis a concat joins.  Where a consumer cannot take what it is given, a
collective is inferred: Partial → Replicated is an all-reduce, a sharded axis the op
needs whole is an all-gather, tokens sent to experts on other devices (dispatch/combine)
are an all-to-all.  Nobody writes "all-reduce after o_proj": it falls out.

Nothing here depends on degrees: a layout says *which* group splits an axis; the
deployments table says by how much (degree 1 makes every collective free).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sympy

from archsql.evaluator import context_parallel as cpar
from archsql.evaluator.dimmap import Flatten, InputDim, NewDim, Part, Singleton, Split
from archsql.evaluator.primitives.base import Ctx, get_primitive
from archsql.evaluator.walk import NodeResult, Walk

DP = "dp"  # data parallelism over requests (the batch axis of model inputs)
EP = "moe_ep"
MOE_TP = "moe_tp"
# the tensor-parallel group of the FFN: the devices that hold the same tokens (attention and
# FFN tensor parallelism are one mesh axis), over which a routed expert output is summed
TOKEN_PEERS = "ffn"
BORROWED = "borrowed"  # the split table a weightless node reads from another node (a tied head)


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


# the measured op kind (archsql.kernel_corpus.registry) of a collective's kernel, by kind; the
# other kinds have none yet
COLLECTIVE_KERNEL_KINDS: dict[str, str] = {"all_reduce": "all_reduce"}


@dataclass(frozen=True)
class Collective:
    kind: str  # all_reduce | all_gather | all_to_all | ring_pass
    group: str
    port: int  # which input of the consumer it prepares (-1: the consumer's output)
    elements: sympy.Expr  # global elements of the tensor communicated (symbolic)
    # the communicated tensor on one device (its groups divide the global elements into one
    # device's share; axis -1: split over a group without an axis of its own); None: by dp
    message: Layout | None = None
    tag: str = ""  # tells collectives of one kind on one port apart (context parallel kinds)
    parts: tuple[tuple[int, int | None], ...] = ()  # whole pieces of the message's split axes


# A fused axis (a projection whose output is several tensors side by side, e.g. Mamba2's
# in_proj = [z | x | B | C | dt]) is a concatenation of segments, each cut into its own
# whole pieces: ((size, parts), ...).  A device holds ceil(parts / degree) pieces of each.
Segments = tuple[tuple[int, int], ...]
Parts = int | None | Segments


@dataclass
class NodeLayout:
    out: Layout
    weights: dict[str, Layout] = field(default_factory=dict)
    collectives: list[Collective] = field(default_factory=list)
    copies_group: str | None = None  # routed experts: their copies are spread over EP
    # whole pieces a sharded axis is cut into (heads, experts' rows …): (tensor, axis) → parts,
    # or the segments of a fused axis.  A device holds ceil(parts / degree) of them — the
    # `fit` rule when parts do not divide.  Tensors: 'out', weights, 'in<port>'.
    parts: dict[tuple[str, int], Parts] = field(default_factory=dict)
    # the layout each input is consumed in (after the collectives that prepare it)
    ins: list[Layout] = field(default_factory=list)
    # the output as its readers get it, when the node itself resolves it (port -1 collectives)
    delivered: Layout | None = None

    @property
    def read(self) -> Layout:
        return self.delivered or self.out


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


def weight_placements(res: NodeResult, walk: Walk) -> tuple[dict[str, Layout], dict[tuple[str, int], Parts]]:
    """Weight placements from the node's weight_axes (or its primitive's default) and the
    bound ``parts`` of each split axis (the segments of a ``fused`` axis), keyed (tensor,
    axis).  The main weight takes weight_axes; a one-axis sibling (a bias) follows the main
    weight's axis 0; anything else is replicated.  A node without a weight of its own that
    reads a split table (a tied head) places that table under :data:`BORROWED`."""
    from archsql.schema.expr import RUNTIME_SYMBOLS, ExprSyntaxError, parse_dim_expr

    raw = res.weight_axes or getattr(res.node.spec, "weight_axes", None) or []
    symbols = {str(k): k for k in walk.binding} | RUNTIME_SYMBOLS

    def bound(text) -> int | None:
        try:
            value = parse_dim_expr(text, symbols).xreplace(walk.binding)
        except ExprSyntaxError:
            return None
        return int(value) if value.is_Integer else None

    main: list[tuple[int, str]] = []
    main_parts: dict[int, Parts] = {}
    for axis, entry in enumerate(raw):
        if isinstance(entry, dict) and "world" in entry:
            main.append((axis, entry["world"]))
            if isinstance(entry.get("fused"), list):
                segments = tuple((bound(s.get("size", 0)), bound(s.get("parts", 0))) for s in entry["fused"])
                main_parts[axis] = segments if all(a and b for a, b in segments) else None
            else:
                main_parts[axis] = bound(entry.get("parts", 0))
    layouts: dict[str, Layout] = {}
    parts: dict[tuple[str, int], Parts] = {}
    for decl in res.weights:
        if decl.tensor == res.weights[0].tensor:
            layouts[decl.tensor] = Layout(tuple(main))
            parts.update({(decl.tensor, axis): p for axis, p in main_parts.items()})
        elif len(decl.axes) == 1 and 0 in main_parts:
            layouts[decl.tensor] = Layout(((0, dict(main)[0]),))
            parts[(decl.tensor, 0)] = main_parts[0]
        else:
            layouts[decl.tensor] = REPLICATED
    if not res.weights and main:
        layouts[BORROWED] = Layout(tuple(main))
        parts.update({(BORROWED, axis): p for axis, p in main_parts.items()})
    return layouts, parts


def _size(axis) -> int | None:
    return int(axis.value) if axis.value.is_Integer else None


def propagate(walk: Walk) -> dict[str, NodeLayout]:
    """Layouts of every node output and weight, with the inferred collectives."""
    inputs = _InputLayouts(walk)
    program = walk.program
    # values a repeated stack carries in: every layer must see one layout, so a pending sum
    # is reduced once where it is made, not in every layer
    enters_stack = {st.input.name for st in program.stacks.values() if st.input.kind == "node"}
    # the graph's outputs (logits for sampling) leave it whole on every rank of a model group
    leaves_graph = {ref.name for ref in program.outputs.values() if ref.kind == "node"}
    for uid, res in walk.results.items():
        lay = _NodeStep(walk, res, inputs).run()
        if uid in enters_stack or uid in leaves_graph:
            lay = _resolved(lay, res, gather=uid in leaves_graph)
        inputs.layouts[uid] = lay
    return inputs.layouts


def _resolved(lay: NodeLayout, res: NodeResult, gather: bool) -> NodeLayout:
    """A node's output made whole where it is produced (port -1): pending sums all-reduced
    and, for a value leaving the graph, model-parallel splits all-gathered (data-parallel
    and context splits stay: each rank samples its own requests).  The node's own output
    (what it computes, its work) keeps its layout; its readers get the delivered one.  vLLM: the vocab-parallel
    embedding's all-reduce; ``LogitsProcessor._gather_logits`` (gather / all-gather)."""
    out, elements = lay.out, _numel(res.shape)
    collectives = list(lay.collectives)
    keep = tuple((a, g) for a, g in out.sharded if not gather or g in (DP, cpar.CP))
    for g in sorted(out.partial):
        collectives.append(Collective("all_reduce", g, -1, elements, Layout(out.sharded)))
    for axis, g in out.sharded:
        if (axis, g) not in keep:
            collectives.append(Collective("all_gather", g, -1, elements, Layout(out.sharded)))
    if len(collectives) == len(lay.collectives):
        return lay
    return replace(lay, collectives=collectives, delivered=Layout(keep))


class _InputLayouts:
    """The layouts decided so far, and the layout each input reference is read in."""

    def __init__(self, walk: Walk):
        self.program, self.results = walk.program, walk.results
        self.layouts: dict[str, NodeLayout] = {}
        self.stream_in: dict[str, Layout] = {}

    def layout_of(self, ref, node) -> Layout:
        if ref.kind == "input":
            return Layout(((0, DP),))  # requests are split over data-parallel ranks
        if ref.kind == "node":
            return self.layouts[ref.name].read if ref.name in self.layouts else REPLICATED
        st = self.program.stacks[ref.name]
        if ref.stream != st.stream:  # internal / append stream: as its first value, history axis inserted
            return self.stream_layout(ref, node)
        if node.stack == ref.name:
            return self.stream_in.setdefault(ref.name, self.layout_of(st.input, node))
        return self.layout_of(st.input, node) if not st.schedule else _residual(self.layout_of(st.input, node))

    def stream_layout(self, ref, node) -> Layout:
        reads = [e for _, refs in self.program.stream_reads(ref, node) for e in refs]
        if not reads:
            return REPLICATED
        lay = self.layout_of(reads[0], node)
        spec = self.program.streams[ref.stream].spec
        results = self.results
        rank = len(results[reads[0].name].shape) if reads[0].kind == "node" and reads[0].name in results else None
        if spec.read == "all" and rank is not None:  # the new history axis shifts the axes after it
            shape = results[reads[0].name].shape
            pos = sum(1 for a in shape if a.runtime) if spec.axis is None else spec.axis % (rank + 1)
            return Layout(tuple((a + (a >= pos), g) for a, g in lay.sharded), lay.partial)
        if spec.read == "concat" and rank is not None:  # the joined axis is whole
            join = (spec.axis if spec.axis is not None else -1) % rank
            return Layout(tuple((a, g) for a, g in lay.sharded if a != join), lay.partial)
        return lay

    def parts_of(self, ref) -> dict[int, Parts]:
        if ref.kind == "node" and ref.name in self.layouts:
            return {axis: p for (tensor, axis), p in self.layouts[ref.name].parts.items() if tensor == "out"}
        return {}


class _NodeStep:
    """The layout of one node, decided in named steps: the inputs as consumed (pending
    merges and sums resolved, axes the op needs whole gathered), the contraction with a
    sharded weight, the tokens routed to experts, then the output through the DimMap."""

    def __init__(self, walk: Walk, res: NodeResult, inputs: _InputLayouts):
        node = res.node
        self.walk, self.res, self.phase = walk, res, walk.program.phase
        self.prim = get_primitive(node.op)()
        self.ctx = Ctx(res.params, res.ins, node.uid, out=res.shape, phase=self.phase)
        ins = [inputs.layout_of(ref, node) for ref in node.inputs]
        self.ins = cpar.split_inputs(self.phase, node.inputs, res.ins, ins, Layout)
        self.in_parts = [inputs.parts_of(ref) for ref in node.inputs]
        self.collectives: list[Collective] = []
        self.weights, self.weight_axis_parts = weight_placements(res, walk)
        self.main_tensor = res.weights[0].tensor if res.weights else BORROWED
        self.contraction = self.prim.contraction(self.ctx)
        self.partial: set[str] = set()
        self.weight_out: dict[int, str] = {}  # output axis → the group splitting the weight axis it comes from
        self.part_segments: dict[int, Parts] = {}

    def run(self) -> NodeLayout:
        self.merge_context_partials()
        self.reduce_partials()
        self.gather_whole_axes()
        dimmap = self.prim.dimmap(self.ctx)
        self.gather_straddled_parts(dimmap)
        self.partial = set().union(*(lay.partial for lay in self.ins)) if self.ins else set()
        self.contract_with_weight()
        self.route_tokens()
        self.collectives += cpar.kernel_collectives(self.prim, self.ctx, self.res, self.ins, Collective, _numel)
        sharded, parts = self.output_axes(dimmap)
        return self.node_layout(sharded, parts)

    def gather(self, port: int, axis: int) -> None:
        lay = self.ins[port]
        self.collectives.append(Collective("all_gather", lay.group_of(axis), port, _numel(self.res.ins[port]), lay))
        self.ins[port] = Layout(tuple((a, h) for a, h in lay.sharded if a != axis), lay.partial)

    # 0. a pending log-sum-exp merge (context parallel) resolves here
    def merge_context_partials(self) -> None:
        for port, lay in enumerate(self.ins):
            if cpar.CP in lay.partial:
                self.collectives += cpar.merge_collectives(
                    port, self.res.ins[port], Layout(lay.sharded), Collective, _numel
                )
                self.ins[port] = Layout(lay.sharded, lay.partial - {cpar.CP})

    # 1. pending sums must be reduced unless the op is linear in that input
    def reduce_partials(self) -> None:
        """— and a linear op passes a pending sum only when every device applies the same op:
        a weight split over the pending group makes each device's op different."""
        split_by_weight = {g for w in self.weights.values() for _, g in w.sharded}
        passes = self.prim.passes_partial([lay.partial for lay in self.ins])
        for port, lay in enumerate(self.ins):
            due = lay.partial & split_by_weight if passes else lay.partial
            for g in sorted(due):
                self.collectives.append(
                    Collective("all_reduce", g, port, _numel(self.res.ins[port]), Layout(lay.sharded))
                )
            if due:
                self.ins[port] = Layout(lay.sharded, lay.partial - due)

    # 2. axes the op reduces over, or joins (concat), must be whole
    def gather_whole_axes(self) -> None:
        prim, res = self.prim, self.res
        whole_ports = prim.whole_last_axis_ports
        if prim.needs_whole_last_axis or prim.shape_kind == "axis_concat":
            for port in range(len(self.ins)) if whole_ports is None else whole_ports:
                last = len(res.ins[port]) - 1
                g = self.ins[port].group_of(last)
                if g is not None and not cpar.keeps_split(prim, res.ins[port], last, g):
                    self.gather(port, last)

    def gather_straddled_parts(self, dimmap) -> None:
        """A part of a sharded axis stays sharded only when it is whole segments of it; a fused
        axis split into several new axes (a reshape across segments) must be whole."""
        for out_axis, spec in enumerate(dimmap):
            if isinstance(spec, Part | Split) and self.ins[spec.port].group_of(spec.axis) is not None:
                whole = _size(self.res.ins[spec.port][spec.axis])
                have = self.in_parts[spec.port].get(spec.axis)
                if isinstance(spec, Part):
                    self.part_segments[out_axis] = _part_of(spec, whole, have)
                    if self.part_segments[out_axis] is None:
                        self.gather(spec.port, spec.axis)
                elif isinstance(have, tuple):
                    self.gather(spec.port, spec.axis)

    # 3. contraction with a sharded weight
    def contract_with_weight(self) -> None:
        contraction = self.contraction
        if contraction is None or not self.weights:
            return
        w = self.weights[self.main_tensor]
        for out_axis, w_axis in contraction.out_axes.items():
            if w.group_of(w_axis):
                self.weight_out[out_axis] = w.group_of(w_axis)
        for port, in_axis, w_axis in contraction.contracted:
            g_in, g_w = self.ins[port].group_of(in_axis), w.group_of(w_axis)
            if g_w is not None:
                self.partial.add(g_w)  # the local slice of the input meets the local slice of the weight
                if g_in is not None and g_in != g_w:
                    self.gather(port, in_axis)
            elif g_in is not None:
                self.gather(port, in_axis)
        for w_axis in contraction.reduced_weight_axes:
            if w.group_of(w_axis):
                self.partial.add(w.group_of(w_axis))

    # 4. routed experts: tokens travel to the devices holding their experts and back.  The
    # (token, expert) pairs are spread over expert parallelism: a device holds the pairs of its
    # own experts (the pair axis sharded over EP, an even split in expectation).  Coming back,
    # a token's expert outputs are a pending sum over the tensor-parallel devices holding the
    # token (TOKEN_PEERS): each computed its own experts (EP) or its own columns of every
    # expert (moe_tp) — with attention TP and experts EP on the same GPUs nothing travels and
    # one all-reduce completes the sum; the all-to-all carries only what other token holders
    # computed (priced per distinct destination rank in int_device_comm_terms).  Valid for a
    # mesh whose MoE span fills the attention span (moe_tp · ep = tp · dp · cp) with moe_tp ≤ tp.
    def route_tokens(self) -> None:
        if self.prim.expert_route == "send":
            self.collectives.append(Collective("all_to_all", EP, 0, _numel(self.res.shape), self.ins[0]))
        if self.prim.expert_route == "return":  # each device gets back its own tokens' expert outputs
            tokens = tuple((a, g) for a, g in self.ins[1].sharded if g in (DP, cpar.CP))
            self.collectives.append(Collective("all_to_all", EP, 0, _numel(self.res.ins[0]), Layout(tokens)))
            self.partial = {g for g in self.partial if g not in (EP, MOE_TP)} | {TOKEN_PEERS}

    # 5. the output layout through the DimMap (with the whole parts each split axis has)
    def output_axes(self, dimmap) -> tuple[list[tuple[int, str]], dict[tuple[str, int], Parts]]:
        sharded: list[tuple[int, str]] = []
        parts: dict[tuple[str, int], Parts] = dict(self.weight_axis_parts)
        for out_axis, spec in enumerate(dimmap):
            g, p = self.output_axis(out_axis, spec, sharded, parts)
            if self.prim.expert_route == "send" and g in (DP, cpar.CP):
                g = None  # experts see every rank's tokens after the all-to-all
            if self.prim.expert_route == "send" and isinstance(spec, NewDim):
                g, p = EP, None  # the (token, expert) pairs: each device holds its experts' share
            if g is not None:
                sharded.append((out_axis, g))
                parts[("out", out_axis)] = None if g in (DP, cpar.CP) else p
        if self.prim.expert_route == "return":  # tokens come back to their own data-parallel (and cp) rank
            back = [(a, g) for a, g in self.ins[1].sharded if g == cpar.CP and a != 0]
            sharded = [(a, g) for a, g in sharded if a != 0 and (a, g) not in back] + [(0, DP), *back]
        return sharded, parts

    def output_axis(self, out_axis: int, spec, sharded, parts) -> tuple[str | None, Parts]:
        """The group splitting one output axis, and the whole pieces it is cut into."""
        res, ins, in_parts = self.res, self.ins, self.in_parts
        g, p = None, _size(res.shape[out_axis])
        if isinstance(spec, InputDim):
            g = ins[spec.port].group_of(spec.axis)
            p = in_parts[spec.port].get(spec.axis, p)
        elif isinstance(spec, Split):
            g = ins[spec.port].group_of(spec.axis) if spec.index == 0 else None
        elif isinstance(spec, Part):
            g = ins[spec.port].group_of(spec.axis)
            p = self.part_segments.get(out_axis, p)
        elif isinstance(spec, Flatten):
            a = next((a for a in spec.axes if ins[spec.port].group_of(a)), None)
            g = ins[spec.port].group_of(a) if a is not None else None
            if a is not None:
                inner = [_size(res.ins[spec.port][b]) for b in spec.axes if b > a]
                p = _scaled(in_parts[spec.port].get(a, _size(res.ins[spec.port][a])), inner)
        elif isinstance(spec, NewDim | Singleton):
            contraction = self.contraction
            g = self.weight_out.get(out_axis) or cpar.context_group(res, ins, sharded, out_axis)
            if g is not None and contraction is not None and out_axis in contraction.out_axes:
                p = parts.get((self.main_tensor, contraction.out_axes[out_axis]), p)
        return g, p

    # 6. what the node holds and sends
    def node_layout(self, sharded, parts) -> NodeLayout:
        res, ins = self.res, self.ins
        if cpar.contracted_context(res, ins, sharded):
            self.partial.add(cpar.CP)  # a device's share of the positions: a pending log-sum-exp merge
        sharded = cpar.cached_split(res, self.phase, sharded)
        self.collectives += cpar.output_collectives(self.prim, res, ins, sharded, Collective, _numel)
        collectives = [_with_parts(c, self.in_parts, ins) for c in self.collectives]
        for port, lay in enumerate(ins):  # the consumed inputs, with the pieces of their split axes
            for axis, g in lay.sharded:
                parts[(f"in{port}", axis)] = (
                    None if g == DP else self.in_parts[port].get(axis, _size(res.ins[port][axis]))
                )
        copies_group = EP if res.copies != 1 else None  # routed experts: their copies are spread over EP
        return NodeLayout(
            Layout(tuple(sorted(sharded)), frozenset(self.partial)), self.weights, collectives, copies_group, parts, ins
        )


def _part_of(spec: Part, whole: int | None, have: Parts) -> Parts:
    """The pieces of part ``spec.index`` of a sharded axis of size ``whole`` cut into
    ``have`` pieces (or segments): the segments the part covers, or None when the part does
    not start and end on segment boundaries (a device's slice then straddles it)."""
    sizes = [_size(a) for a in spec.parts]
    if have is None or whole is None or any(s is None for s in sizes):
        return None
    segments = have if isinstance(have, tuple) else ((whole, have),)
    start = sum(sizes[: spec.index])  # type: ignore[arg-type]
    end = start + sizes[spec.index]  # type: ignore[operator]
    covered, pos = [], 0
    for size, pieces in segments:
        if start <= pos and pos + size <= end:
            covered.append((size, pieces))
        elif pos < end and pos + size > start:
            return None
        pos += size
    if not covered or sum(s for s, _ in covered) != end - start:
        return None
    return covered[0][1] if len(covered) == 1 else tuple(covered)


def _scaled(parts: Parts, inner: list[int | None]) -> Parts:
    """Pieces of an axis merged with the axes inside it: counts stay, segment sizes grow."""
    if not isinstance(parts, tuple):
        return parts
    if any(n is None for n in inner):
        return None
    factor = 1
    for n in inner:
        factor *= n  # type: ignore[operator]
    return tuple((size * factor, pieces) for size, pieces in parts)


def _with_parts(coll: Collective, in_parts: list[dict[int, Parts]], ins: list[Layout]) -> Collective:
    """The whole pieces of each split axis of a collective's message (from its port)."""
    if coll.message is None or coll.parts or not 0 <= coll.port < len(in_parts):
        return coll
    pieces = in_parts[coll.port]
    found = tuple(
        (a, pieces.get(a) if isinstance(pieces.get(a), int) and g not in (DP, cpar.CP) else None)
        for a, g in coll.message.sharded
        if a >= 0
    )
    return replace(coll, parts=found)


def _residual(lay: Layout) -> Layout:
    return Layout(lay.sharded)
