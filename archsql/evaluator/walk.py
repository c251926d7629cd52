"""infer_shapes: one walk over a Program that decides every per-node fact.

For each node: its output shape (through the primitive's DimMap), its FLOP expression,
its weights, and its copies (routed experts).  All expressions stay symbolic in model
dims and runtime symbols; ``Axis.value`` carries the dims-bound form.  Shape errors are
collected with the node's location; nodes downstream of a failed node are skipped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import sympy

from archsql.errors import Issue, unknown_name
from archsql.evaluator.dimmap import Axis
from archsql.evaluator.factors import chunk_len
from archsql.evaluator.ir import IRNode, Program, Ref
from archsql.evaluator.primitives.base import Ctx, NodeShapeError, WeightDecl, get_primitive
from archsql.schema.checks import Collector, add_issue
from archsql.schema.expr import RUNTIME_SYMBOLS, ExprSyntaxError, dim_symbols, parse_dim_expr
from archsql.schema.spec import CACHE_DTYPE_RULES
from archsql.schema.weight_axes import check_weight_axes

# token ids, the per-token position / segment ids an encoder embeds (BERT), and a request's
# image as v patches (each patch's pixels are read by the patch embedding)
MODEL_INPUT_SHAPES = {
    "input_ids": ("B", "s"),
    "position_ids": ("B", "s"),
    "token_type_ids": ("B", "s"),
    "pixel_values": ("B", "v"),
}


@dataclass(frozen=True)
class CacheFact:
    """A declared cache of one node: what one request keeps, and how it grows with c."""

    family: str
    kind: str
    growth: str  # per_token | window | compressed | state | chunk
    elements: Axis  # per cached position (state: per request)
    window: Axis | None
    ratio: Axis | None
    chunk: Axis | None = None  # growth chunk: positions per attention chunk
    # storage: kv (the deployment's kv dtype) | act | a fixed dtype, with an optional scale of
    # scale_dtype per scale_block elements (archsql.schema.spec.CACHE_DTYPE_RULES)
    dtype: str = "kv"
    scale_dtype: str | None = None
    scale_block: int | None = None

    def positions(self, symbolic: bool = True) -> sympy.Expr:
        """Cached positions per request at context c (1 for a state)."""
        pick = (lambda a: a.expr) if symbolic else (lambda a: a.value)
        if self.growth == "per_token":
            return C
        if self.growth == "window":  # a window of 0 keeps every position
            return C if self.window.value == 0 else sympy.Min(C, pick(self.window))
        if self.growth == "compressed":
            return sympy.ceiling(C / pick(self.ratio))
        if self.growth == "chunk":  # the latest token's chunk; a chunk of 0 keeps every position
            return C if self.chunk.value == 0 else chunk_len(C, pick(self.chunk))
        return sympy.Integer(1)

    def expr(self) -> sympy.Expr:
        """Cache elements of a batch of B requests at context c (symbolic in dims)."""
        return RUNTIME_SYMBOLS["B"] * self.elements.expr * self.positions()


C = RUNTIME_SYMBOLS["c"]
CACHE_RUNTIME_AXES = {"state": ["B"]}  # other growths cache one entry per new token: [B, s, ...]


@dataclass
class NodeResult:
    node: IRNode
    ins: list[list[Axis]]
    shape: list[Axis]
    flops: sympy.Expr  # per copy, symbolic in dims and runtime symbols
    weights: list[WeightDecl]
    copies: sympy.Expr
    active_copies: sympy.Expr
    caches: list[CacheFact]
    params: dict[str, object]  # the node's bound parameters (Axis / list / ints), as the primitive saw them
    io: tuple[sympy.Expr, ...] = ()  # activation elements read, written; cache elements read
    read_ports: tuple[sympy.Expr, ...] = ()  # the reads of io[0], per input port
    # how the node's table is split (its own weight_axes, else its primitive's checked default)
    weight_axes: list | None = None


@dataclass
class Walk:
    program: Program
    results: dict[str, NodeResult]
    binding: dict[sympy.Symbol, sympy.Integer]
    stack_shapes: dict[str, list[Axis]]

    def bind(self, expr: sympy.Expr) -> sympy.Expr:
        return sympy.expand(expr.xreplace(self.binding))


def _read_ports(prim, reads, ins) -> tuple[sympy.Expr, ...]:
    """The activation reads of an op per input port (``Primitive.io``)."""
    if isinstance(reads, tuple | list):
        assert len(reads) == len(ins), f"{prim.name}.io gives reads of {len(reads)} ports, the op has {len(ins)} inputs"
        return tuple(sympy.sympify(r) for r in reads)
    reads = sympy.sympify(reads)
    if reads == 0:
        return tuple(sympy.Integer(0) for _ in ins)
    assert len(ins) == 1, f"{prim.name}.io must give its reads per input port (it has {len(ins)} inputs)"
    return (reads,)


def _runtime_axis(name: str) -> Axis:
    sym = RUNTIME_SYMBOLS[name]
    return Axis(name, sym, sym)


def _cache_fact(family: str, entry, node: IRNode, shape: list[Axis], axis_of, col: Collector) -> CacheFact | None:
    """The cache an entry declares on ``node``; its shape must be [B, s, ...] ([B, ...] for a state)."""
    runtime = [str(a.value) for a in shape if a.runtime]
    want = CACHE_RUNTIME_AXES.get(entry.growth, ["B", "s"])
    if runtime != want:
        col.issues.append(
            Issue(
                f"cache entry '{entry.node}' ({entry.growth}) caches a tensor of the wrong kind",
                file=entry.where.file,
                line=entry.where.line,
                column=entry.where.column,
                path=entry.where.path,
                expected="runtime axes ["
                + ", ".join(want)
                + "] (one entry per "
                + ("request" if want == ["B"] else "new token")
                + ")",
                got="[" + ", ".join(a.label for a in shape) + "]",
                hint="a state cache holds [B, ...]; a per-token, windowed or compressed cache holds [B, s, ...]",
                rule="axiom:cache_axes",
            )
        )
        return None
    fixed = [a for a in shape if not a.runtime]
    elements = Axis(
        "*".join(a.label for a in fixed) or "1",
        sympy.Mul(*(a.expr for a in fixed)),
        sympy.Mul(*(a.value for a in fixed)),
    )
    window = axis_of(entry.window, entry.where) if entry.window is not None else None
    ratio = axis_of(entry.ratio, entry.where) if entry.ratio is not None else None
    raw_chunk = getattr(entry, "chunk", None)
    chunk = axis_of(raw_chunk, entry.where) if raw_chunk is not None else None
    if (entry.window is not None and window is None) or (entry.ratio is not None and ratio is None):
        return None
    if raw_chunk is not None and chunk is None:
        return None
    if not _known_cache_dtypes(entry, col):
        return None
    return CacheFact(
        family,
        entry.kind,
        entry.growth,
        elements,
        window,
        ratio,
        chunk,
        entry.dtype,
        entry.scale_dtype,
        entry.scale_block,
    )


@functools.cache
def _storage_dtypes() -> tuple[str, ...]:
    """The dtypes a new store's dtypes table holds (archsql/defaults/dtypes.csv)."""
    from archsql.defaults import load_default

    return tuple(load_default("dtypes").column("dtype").to_pylist())


def _known_cache_dtypes(entry, col: Collector) -> bool:
    """A fixed cache dtype (and its scale's) must be a row of the dtypes table."""
    ok = True
    for what, name in (("dtype", entry.dtype), ("scale dtype", entry.scale_dtype)):
        if name is None or (what == "dtype" and name in CACHE_DTYPE_RULES) or name in _storage_dtypes():
            continue
        message, hint = unknown_name(f"cache {what}", name, [*CACHE_DTYPE_RULES, *_storage_dtypes()])
        col.issues.append(
            Issue(
                f"cache entry '{entry.node}': {message}",
                file=entry.where.file,
                line=entry.where.line,
                column=entry.where.column,
                path=entry.where.path,
                hint=hint,
            )
        )
        ok = False
    return ok


def _attention_caps(results: dict[str, NodeResult], cap: str) -> dict[str, set]:
    """Scope (the component's uid) → the values of ``cap`` (window / chunk) its attention
    attends, from each primitive's ``kv_cache_caps``."""
    caps: dict[str, set] = {}
    for uid, res in results.items():
        value = get_primitive(res.node.op)().kv_cache_caps(res.params).get(cap)
        if value is not None:
            caps.setdefault(uid.rsplit(".", 1)[0], set()).add(value)
    return caps


def _check_windowed_caches(results: dict[str, NodeResult], col: Collector) -> None:
    """Axiom: attention over a sliding window keeps only the window; its K/V caches must
    be declared with the same cap (a config sliding window without a capped cache is wrong)."""
    windows = _attention_caps(results, "window")
    for uid, res in results.items():
        scope = uid.rsplit(".", 1)[0]
        for fact in res.caches:
            if scope not in windows or fact.kind not in ("key", "value"):
                continue
            capped = fact.growth == "window" and fact.window is not None and fact.window.value in windows[scope]
            if not capped:
                entry = next(e for _, e in res.node.cache if e.kind == fact.kind)
                col.issues.append(
                    Issue(
                        f"attention in '{scope}' sees a sliding window of {sorted(windows[scope])[0]} keys, "
                        f"but its {fact.kind} cache '{entry.node}' is not capped at that window",
                        file=entry.where.file,
                        line=entry.where.line,
                        column=entry.where.column,
                        path=entry.where.path,
                        expected=f"growth: window with the attention's window ({sorted(windows[scope])[0]})",
                        got=f"growth: {fact.growth}" + (f", window {fact.window.value}" if fact.window else ""),
                        hint="write growth: window, window: <the same dim as the attention's window>",
                        rule="axiom:window_cache",
                    )
                )


def _check_chunked_caches(results: dict[str, NodeResult], col: Collector) -> None:
    """Axiom: chunked attention reads only the latest token's chunk; its K/V caches must be
    declared with the chunk law and the same chunk (a config attention_chunk_size without a
    chunked cache is wrong), and a chunk cache needs chunked attention."""
    chunks = _attention_caps(results, "chunk")
    for uid, res in results.items():
        scope = uid.rsplit(".", 1)[0]
        for fact in res.caches:
            if fact.kind not in ("key", "value"):
                continue
            chunked = fact.growth == "chunk" and fact.chunk is not None and fact.chunk.value != 0
            if scope not in chunks and not chunked:
                continue
            if scope in chunks and chunked and fact.chunk.value in chunks[scope]:
                continue
            entry = next(e for _, e in res.node.cache if e.kind == fact.kind)
            want = sorted(chunks.get(scope, {0}))[0]
            col.issues.append(
                Issue(
                    f"attention in '{scope}' attends chunks of {want} positions, "
                    f"but its {fact.kind} cache '{entry.node}' is declared with "
                    + (f"growth {fact.growth}" if not chunked else f"chunk {fact.chunk.value}"),
                    file=entry.where.file,
                    line=entry.where.line,
                    column=entry.where.column,
                    path=entry.where.path,
                    expected=f"growth: chunk with the attention's chunk ({want})"
                    if want
                    else "no chunk law (the attention is not chunked)",
                    got=f"growth: {fact.growth}" + (f", chunk {fact.chunk.value}" if fact.chunk else ""),
                    hint="write growth: chunk, chunk: <the same dim as the attention's chunk>",
                    rule="axiom:chunk_cache",
                )
            )


def walk(program: Program, library, dims: dict[str, int], col: Collector) -> Walk:
    """infer_shapes: every node in dataflow order, then the stacks' outputs and the cache axioms."""
    walker = _Walker(program, library, dims, col)
    for node in program.nodes:
        walker.visit(node)
    for ref in program.outputs.values():
        if ref.kind == "stream":
            walker.stack_output(ref.name)
    _check_windowed_caches(walker.results, col)
    _check_chunked_caches(walker.results, col)
    walker.report_unbound()
    return Walk(program, walker.results, walker.binding, walker.stack_shapes)


class _Walker:
    """The state of one walk: the results so far, the shapes entering and leaving stacks,
    and the dims found unbound (reported once, at the end)."""

    def __init__(self, program: Program, library, dims: dict[str, int], col: Collector):
        self.program, self.library, self.col = program, library, col
        self.symbols = dim_symbols(library.dims)
        self.binding = {self.symbols[k]: sympy.Integer(v) for k, v in dims.items()}
        self.results: dict[str, NodeResult] = {}
        self.stack_shapes: dict[str, list[Axis]] = {}
        self.unbound: dict[str, list[str]] = {}

    # -- dims -------------------------------------------------------------------------
    def axis_of(self, raw, where) -> Axis | None:
        try:
            expr = parse_dim_expr(raw, self.symbols)
        except ExprSyntaxError as exc:
            add_issue(self.col, where, str(exc))
            return None
        value = expr.xreplace(self.binding)
        missing = [str(s) for s in value.free_symbols if str(s) not in RUNTIME_SYMBOLS]
        if missing:
            for m in missing:
                self.unbound.setdefault(m, []).append(where.path)
            return None
        return Axis(str(raw), expr, value)

    def node_params(self, prim_cls, node: IRNode) -> dict[str, object] | None:
        """The node's parameters bound as the primitive reads them (None: a dim failed)."""
        ctx_dims: dict[str, object] = {}
        ok = True
        for pname, param in prim_cls.params.items():
            raw = node.dims.get(pname, param.default)
            where = node.dims_where.get(pname, node.where)
            if param.kind == "ints":
                ctx_dims[pname] = list(raw)
            elif param.kind == "dims":
                axes = [self.axis_of(r, where) for r in raw]
                ok &= all(a is not None for a in axes)
                ctx_dims[pname] = axes
            elif isinstance(raw, str) and raw.startswith("@"):
                ctx_dims[pname] = None
            else:
                axis = self.axis_of(raw, where)
                ok &= axis is not None
                ctx_dims[pname] = axis
        return ctx_dims if ok else None

    def report_unbound(self) -> None:
        model = self.program.model
        for dim, paths in sorted(self.unbound.items()):
            self.col.issues.append(
                Issue(
                    f"dim '{dim}' is used but not bound by model '{model.name}' (used at {', '.join(sorted(set(paths))[:3])})",
                    file=model.file,
                    line=model.where["dims"].line if "dims" in model.where else None,
                    path="$.dims",
                    hint=f"bind it under dims:, e.g. '{dim}: config.<key>' — dims are never defaulted",
                    rule="dim_unbound",
                )
            )

    # -- one node ---------------------------------------------------------------------
    def visit(self, node: IRNode) -> None:
        """Infer one node: its input shapes, bound params, output shape, caches and costs."""
        prim_cls = get_primitive(node.op)
        prim = prim_cls()
        ins = [self.shape_of(r, node) for r in node.inputs]
        if any(s is None for s in ins):
            return
        ctx_dims = self.node_params(prim_cls, node)
        if ctx_dims is None:
            return
        ctx = Ctx(ctx_dims, ins, node.uid, phase=self.program.phase)  # type: ignore[arg-type]
        shape = self.output_shape(prim, ctx, node)
        if shape is None:
            return
        ctx.out = shape
        caches = [
            fact
            for family, entry in node.cache
            if (fact := _cache_fact(family, entry, node, shape, self.axis_of, self.col)) is not None
        ]
        self.results[node.uid] = self.result(prim, ctx, node, caches)

    def output_shape(self, prim, ctx: Ctx, node: IRNode) -> list[Axis] | None:
        try:
            return prim.output_shape(ctx)
        except NodeShapeError as exc:
            self.col.issues.append(
                Issue(
                    f"node '{node.uid}' ({node.op}): {exc}",
                    file=node.where.file,
                    line=node.where.line,
                    column=node.where.column,
                    path=node.where.path,
                    expected=exc.expected,
                    got=exc.got,
                    hint=exc.hint,
                )
            )
            return None

    def result(self, prim, ctx: Ctx, node: IRNode, caches: list[CacheFact]) -> NodeResult:
        """The node's facts from its primitive's rules (its weight_axes checked on the way)."""
        weights = prim.weights(ctx)
        reads, writes = prim.io(ctx)
        read_ports = _read_ports(prim, reads, ctx.ins)
        self.col.issues.extend(
            check_weight_axes(
                node.spec, list(weights[0].axes) if weights else [], self.library.dims, self.symbols, self.binding
            )
        )
        weight_axes = getattr(node.spec, "weight_axes", None)
        default = prim.default_weight_axes(ctx) if weight_axes is None and node.spec is not None else None
        if default is not None:  # the primitive's own split, kept only where the dims table allows it
            entries, axes = default
            stand_in = replace(node.spec, weight_axes=entries, weight_axes_where=None)
            if not check_weight_axes(stand_in, list(axes), self.library.dims, self.symbols, self.binding):
                weight_axes = entries
        return NodeResult(
            node,
            ctx.ins,
            ctx.out,
            sympy.sympify(prim.flops(ctx)),
            weights,
            sympy.sympify(prim.copies(ctx)),
            sympy.sympify(prim.active_copies(ctx)),
            caches,
            ctx.dims,
            tuple(sympy.sympify(e) for e in (sympy.Add(*read_ports), writes, prim.cache_reads(ctx))),
            read_ports,
            weight_axes,
        )

    # -- input shapes -----------------------------------------------------------------
    def shape_of(self, ref: Ref, node: IRNode) -> list[Axis] | None:
        if ref.kind == "input":
            return self.input_shape(ref, node)
        if ref.kind == "node":
            res = self.results.get(ref.name)
            return res.shape if res else None
        st = self.program.stacks[ref.name]
        if ref.stream != st.stream:  # an internal or append stream
            return self.stream_shape(ref, node)
        if node.stack == ref.name:  # inside the stack: the stream's value entering a layer
            return self.stack_shapes.get(f"{ref.name}:in") or self.stack_input(st, node)
        return self.stack_output(ref.name)

    def input_shape(self, ref: Ref, node: IRNode) -> list[Axis] | None:
        axes = MODEL_INPUT_SHAPES.get(ref.name)
        if axes is None:
            add_issue(
                self.col,
                node.where,
                f"model input '{ref.name}' has no known shape",
                hint=f"known inputs: {', '.join(MODEL_INPUT_SHAPES)}",
            )
            return None
        return [_runtime_axis(a) for a in axes]

    def stack_input(self, st, node) -> list[Axis] | None:
        shape = self.shape_of(st.input, node)
        if shape is not None:
            self.stack_shapes[f"{st.spec.name}:in"] = shape
        return shape

    def stack_output(self, name: str) -> list[Axis] | None:
        st = self.program.stacks[name]
        shape_in = self.stack_shapes.get(f"{name}:in")
        if shape_in is None:
            return None
        for template, ref in st.outputs.items():
            res = self.results.get(ref.name)
            if res is None:
                return None
            if [a.value for a in res.shape] != [a.value for a in shape_in]:
                add_issue(
                    self.col,
                    st.spec.where,
                    f"the carried stream '{st.stream}' changes shape across a layer of template '{template}'",
                    expected="[" + ", ".join(a.label for a in shape_in) + "]",
                    got="[" + ", ".join(a.label for a in res.shape) + "]",
                    hint="a block's output must have the shape of its input; check the block's last node",
                )
                return None
        self.stack_shapes[name] = shape_in
        return shape_in

    # -- streams ----------------------------------------------------------------------
    def stream_shape(self, ref: Ref, node: IRNode) -> list[Axis] | None:
        """What a reader sees of an internal / append stream: the producing layer's value
        (internal, read: each), the archive stacked on a new history axis (read: all) or
        joined along ``axis`` (read: concat).  Readers of one template see one length
        (expand groups a template's layers by archive length)."""
        spec = self.program.streams[ref.stream].spec
        per_layer = []
        for _, refs in self.program.stream_reads(ref, node):
            shapes = [self.shape_of(e, node) for e in refs]
            if any(sh is None for sh in shapes):
                return None
            per_layer.append(shapes)
        flat = [sh for shapes in per_layer for sh in shapes]
        lengths = {len(shapes) for shapes in per_layer}
        if not flat or len(lengths) != 1:  # pragma: no cover - expand checks readers and groups lengths
            add_issue(
                self.col, spec.where, f"stream '{spec.name}': node '{node.uid}' reads archives of lengths {lengths}"
            )
            return None
        n = lengths.pop()
        first = flat[0]
        join = None
        if spec.read == "concat":
            join = spec.axis if spec.axis is not None else -1
            join = join + len(first) if join < 0 else join
        if not self.same_stream_shapes(spec, flat, join):
            return None
        if spec.kind == "internal" or spec.read == "each":
            return first
        if spec.read == "all":
            return self.history_shape(spec, first, n)
        return self.joined_shape(spec, flat, n, join)

    def same_stream_shapes(self, spec, flat: list[list[Axis]], join: int | None) -> bool:
        """Every value of a stream has one shape (but along the axis a concat joins)."""
        first = flat[0]
        for other in flat[1:]:
            same_rank = len(other) == len(first)
            if not same_rank or any(
                a.value != b.value for k, (a, b) in enumerate(zip(first, other, strict=True)) if k != join
            ):
                add_issue(
                    self.col,
                    spec.where,
                    f"stream '{spec.name}' holds values of different shapes across layers",
                    expected="[" + ", ".join(a.label for a in first) + "]",
                    got="[" + ", ".join(a.label for a in other) + "]",
                    hint="every producing / archived layer must publish the same shape",
                )
                return False
        return True

    def history_shape(self, spec, first: list[Axis], n: int) -> list[Axis] | None:
        """read: all — the n archived values stacked on a new history axis."""
        lead = sum(1 for a in first if a.runtime)
        pos = lead if spec.axis is None else (spec.axis if spec.axis >= 0 else len(first) + 1 + spec.axis)
        if not 0 <= pos <= len(first):
            add_issue(self.col, spec.keys_where.get("axis", spec.where), f"stream '{spec.name}': no axis {spec.axis}")
            return None
        history = Axis(str(n), sympy.Integer(n), sympy.Integer(n))
        return [*first[:pos], history, *first[pos:]]

    def joined_shape(self, spec, flat: list[list[Axis]], n: int, join: int) -> list[Axis] | None:
        """read: concat — the n archived values joined along a model-dim axis."""
        first = flat[0]
        if not 0 <= join < len(first) or first[join].runtime:
            add_issue(
                self.col,
                spec.keys_where.get("axis", spec.where),
                f"stream '{spec.name}' (read: concat) joins along axis {spec.axis if spec.axis is not None else -1}",
                expected="a model-dim axis of [" + ", ".join(a.label for a in first) + "]",
                got=first[join].label if 0 <= join < len(first) else "no such axis",
            )
            return None
        parts = [sh[join] for sh in flat[:n]]
        joined = Axis(
            f"{n}*{first[join].label}"
            if all(a.value == first[join].value for a in parts)
            else "+".join(a.label for a in parts),
            sympy.Add(*(a.expr for a in parts)),
            sympy.Add(*(a.value for a in parts)),
        )
        return [*first[:join], joined, *first[join + 1 :]]
