"""Spec files as typed objects: the dims table, the roles registry, components, models.

Parsing is closed and collects every issue of a file before raising one SpecError.
Cross-file references (components used by a model, ops, dims, roles) are checked by
``archsql.schema.crossref``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsql.errors import SpecError, did_you_mean
from archsql.schema.checks import Collector, type_name
from archsql.schema.yamlsrc import LocDict, load_yaml

NODE_KEYS = ("op", "slot", "stack", "in", "dims", "weight_axes", "path", "role", "doc")
MISPLACED_STREAM_KEYS = ("stream_out", "reads", "streams")  # node keys written for streams: rejected with the spelling
COMPONENT_KEYS = (
    "component",
    "role",
    "doc",
    "inputs",
    "reads",  # cross-layer streams the component reads by name (a stack's internal/append streams)
    "slots",
    "cache",
    "decode_variant",
    "graph",
    "outputs",
)
MODEL_KEYS = (
    "model",
    "extends",
    "hf_id",
    "config",
    "doc",
    "dims",
    "components",
    "templates",
    "stacks",
    "inputs",
    "graph",
    "outputs",
    "quant_context",  # storage formats: archsql.schema.quant (parsed by the storage pass)
    "buffers",  # non-parameter tensors saved in the checkpoint: archsql.schema.quant.parse_buffers
    "source",  # the forward source (path(s) of the modeling file) stream src anchors quote: archsql.source_guard
    # config keys the spec has read and deliberately does not bind: key (dotted) → why
    # (archsql.evaluator.bind.unread_config_warnings; archsql/specs/config_keys.yaml)
    "config_unused",
    # parts of the checkpoint the spec deliberately does not model (a vision tower, an audio
    # encoder): name → {tensors: [globs], config: [keys], reason}; the author guards compare
    # the modelled part only and report these apart (archsql.author.guards)
    "omitted",
)
OMITTED_KEYS = ("tensors", "config", "reason")
STACK_KEYS = ("repeat", "path", "streams", "schedule", "role", "first_layer")
STACK_ROLES = ("decoder", "mtp", "vision")
# A stack's streams (docs/specir.md "Streams"): the carried residual ({carries: true}), an
# internal stream (from: <node path>, read by a later layer), or an append stream (from:
# <node path> or the carried stream, archived after:/before: chosen layers, read: each|all|concat).
STREAM_KEYS = ("carries", "from", "after", "before", "read", "axis", "src", "doc")
STREAM_READS = ("each", "all", "concat")
STREAM_KINDS = ("carried", "internal", "append")
SLOT_FILL_KEYS = ("component", "path", "rename")
TEMPLATE_DIMS_KEY = "dims"  # under templates.<t>: per-template dim overrides (not a slot)
CACHE_KEYS = ("family", "entries")
CACHE_ENTRY_KEYS = ("node", "kind", "growth", "window", "ratio", "chunk", "dtype", "scale")
# the storage dtype rule of a cache entry: ``kv`` the deployment's kv dtype (attention K/V and
# latent caches; the default), ``act`` its activation dtype, or a fixed dtype of the dtypes
# parameter table (``fp32``, ``fp8``, ...), optionally with ``scale: {dtype, per}``: one scale
# of that dtype per ``per`` elements (an FP8 cache with a per-block FP32 scale)
CACHE_DTYPE_RULES = ("kv", "act")
CACHE_SCALE_KEYS = ("dtype", "per")
# per_token: grows with context c; window: capped at min(c, window); compressed: one entry
# per `ratio` positions, ceil(c / ratio); state: fixed size per request (recurrent state);
# chunk: chunked local attention keeps the latest token's chunk, (c - 1) mod chunk + 1
CACHE_GROWTHS = ("per_token", "window", "compressed", "state", "chunk")
CACHE_GROWTH_PARAM = {"window": "window", "compressed": "ratio", "chunk": "chunk"}
DIMS_ENTRY_KEYS = ("kind", "shardable_by", "doc")
DIM_KINDS = (
    "hidden",
    "layers",
    "head_count",
    "head_dim",
    "ffn",
    "expert_count",
    "count",
    "vocab",
    "context",
    "flag",
    "window",
    "index",
    "whole",
)
ROLE_KEYS = ("doc", "container")


@dataclass(frozen=True)
class Where:
    """Where a value was written."""

    file: str
    line: int | None
    column: int | None
    path: str


def _where(file: str, obj: Any, key: str | None, path: str) -> Where:
    file = getattr(obj, "file", None) or file  # inherited values point at their own file
    if isinstance(obj, LocDict) and key is not None:
        line, col = obj.key_pos(key)
    else:
        line, col = getattr(obj, "line", None), getattr(obj, "column", None)
    return Where(file, line, col, path)


@dataclass
class NodeSpec:
    name: str
    where: Where
    op: str | None = None
    slot: str | None = None
    stack: str | None = None
    inputs: list[str] = field(default_factory=list)
    dims: dict[str, Any] = field(default_factory=dict)
    dims_where: dict[str, Where] = field(default_factory=dict)
    weight_axes: Any = None
    weight_axes_where: Where | None = None
    path: str | None = None
    role: str | None = None


@dataclass
class CacheEntry:
    node: str
    kind: str
    growth: str
    where: Where
    window: Any = None  # dim expression, growth 'window'
    ratio: Any = None  # dim expression, growth 'compressed'
    chunk: Any = None  # dim expression, growth 'chunk'
    dtype: str = "kv"  # storage rule: kv | act | a fixed dtype (CACHE_DTYPE_RULES)
    scale_dtype: str | None = None  # a fixed dtype's scale: one of this dtype ...
    scale_block: int | None = None  # ... per this many elements


@dataclass
class StreamSpec:
    """One declared stream of a stack (``stacks.<s>.streams.<name>``)."""

    name: str
    kind: str  # carried | internal | append
    where: Where  # the stream's key
    keys_where: dict[str, Where] = field(default_factory=dict)  # from/after/read/... -> where
    source: str | None = None  # from: a node path inside the stack's templates, or the carried stream's name
    at: str | None = None  # append: 'after' (layer exit) | 'before' (layer entry)
    layers: Any = None  # append: [i, ...] | 'a:b[:step]' | 'all' | {every: k}
    read: str | None = None  # append: each | all | concat
    axis: int | None = None  # append, read all: where the history axis goes; concat: the axis joined
    src: str | None = None  # a sentence with a back-quoted fragment of the model's forward source


@dataclass
class ComponentSpec:
    name: str
    file: str
    role: str
    inputs: list[str]
    graph: dict[str, NodeSpec]
    outputs: list[str]
    slots: dict[str, list[str]] = field(default_factory=dict)  # slot -> accepted roles
    cache_family: str | None = None
    cache: list[CacheEntry] = field(default_factory=list)
    decode_variant: str | None = None
    doc: str = ""
    where: dict[str, Where] = field(default_factory=dict)  # top-level key -> where
    reads: list[str] = field(default_factory=list)  # cross-layer streams read by name (used like inputs)


@dataclass
class SlotFill:
    component: str
    path: str | None
    rename: dict[str, str]
    where: Where


@dataclass
class StackSpec:
    name: str
    repeat: Any
    path: str
    streams: dict[str, dict]
    schedule: Any
    where: Where
    keys_where: dict[str, Where] = field(default_factory=dict)  # repeat/schedule/... -> where
    role: str = "decoder"  # decoder | mtp (multi-token-prediction layers: on disk, optional at serving) | vision
    first_layer: Any = 0  # dim expression: index of the first layer in checkpoint paths
    stream_specs: dict[str, StreamSpec] = field(default_factory=dict)  # parsed ``streams:``


@dataclass(frozen=True)
class OmittedPart:
    """A part of the checkpoint a spec does not model: its checkpoint tensors (glob patterns
    over the stored names, ``*`` across dots), the config keys (dotted) that configure only it,
    and why it is left out."""

    name: str
    tensors: tuple[str, ...]
    config: tuple[str, ...]
    reason: str
    where: Where

    def matches(self, name: str) -> bool:
        from fnmatch import fnmatchcase

        return any(fnmatchcase(name, p) for p in self.tensors)


@dataclass
class ModelSpec:
    name: str
    file: str
    hf_id: str
    config_file: str
    dims: dict[str, Any]
    dims_where: dict[str, Where]
    components: dict[str, SlotFill]
    templates: dict[str, dict[str, SlotFill]]
    templates_where: dict[str, Where]
    stacks: dict[str, StackSpec]
    inputs: list[str]
    graph: dict[str, NodeSpec]
    outputs: list[str]
    doc: str = ""
    where: dict[str, Where] = field(default_factory=dict)
    # per template: dim -> dim expression its nodes read instead (``templates.<t>.dims``)
    template_dims: dict[str, dict[str, Any]] = field(default_factory=dict)
    template_dims_where: dict[str, dict[str, Where]] = field(default_factory=dict)
    quant_context: Any = None  # raw mapping (positions kept); archsql.schema.quant.parse_quant_context
    buffers: Any = None  # raw mapping; archsql.schema.quant.parse_buffers
    # the model's forward source: path(s) of the modeling file(s) inside their repository
    # (e.g. src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py); the source guard
    # finds every stream src anchor in them (archsql.source_guard)
    source: list[str] = field(default_factory=list)
    # config keys the spec does not bind, each with the reason (``config_unused:``)
    config_unused: dict[str, str] = field(default_factory=dict)
    # parts of the checkpoint left out of the model (``omitted:``), by name
    omitted: dict[str, OmittedPart] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def _str_list(col: Collector, obj: LocDict, key: str, path: str) -> list[str]:
    value = obj.get(key)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    col.add(
        obj,
        key,
        f"{path}.{key}",
        f"'{key}' must be a name or a list of names",
        expected="string or list of strings",
        got=type_name(value),
        value=True,
    )
    return []


def _parse_graph(col: Collector, parent: Any, path: str, allow_slot: bool, allow_stack: bool) -> dict[str, NodeSpec]:
    obj = parent.get("graph")
    if not isinstance(obj, dict) or not obj:
        col.add(
            parent,
            "graph",
            path,
            "graph must be a non-empty mapping of node name → node",
            expected="non-empty mapping",
            got=type_name(obj),
            value=obj is not None,
        )
        return {}
    nodes: dict[str, NodeSpec] = {}
    for name, raw in obj.items():
        npath = f"{path}.{name}"
        where = _where(col.file, obj, name, npath)
        if not isinstance(name, str) or not name.replace("_", "a").isalnum():
            col.add(obj, name, npath, f"node name {name!r} must be an identifier", hint="use letters, digits and '_'")
            continue
        if not col.keys(raw, npath, (*NODE_KEYS, *MISPLACED_STREAM_KEYS), at=(obj, name)):
            continue
        for key in MISPLACED_STREAM_KEYS:
            if key in raw:
                col.add(
                    raw,
                    key,
                    f"{npath}.{key}",
                    f"a node does not declare streams ('{key}:'); streams are declared on the stack, read by components",
                    hint="publish a node's value on its stack: streams: { NAME: { from: <slot.node path>, src: … } }; "
                    "read it in a component with 'reads: [NAME]' and 'in: [..., NAME]', or in the model graph "
                    "with 'in: <stack node>.NAME'",
                )
        node = NodeSpec(name=name, where=where)
        kinds = [k for k in ("op", "slot", "stack") if k in raw]
        if len(kinds) != 1:
            col.add(
                raw,
                None,
                npath,
                "a node needs exactly one of 'op', 'slot', 'stack'",
                expected="one of op/slot/stack",
                got=", ".join(kinds) or "none",
            )
        for k in kinds:
            if col.type(raw, k, npath, (str,), "a name"):
                setattr(node, k, raw[k])
        if node.slot and not allow_slot:
            col.add(
                raw,
                "slot",
                f"{npath}.slot",
                "'slot:' nodes are only allowed in components with role 'block'",
                hint="declare the component's role as block and list the slot under 'slots:'",
            )
        if node.stack and not allow_stack:
            col.add(raw, "stack", f"{npath}.stack", "'stack:' nodes are only allowed in model graphs")
        if "in" in raw:
            node.inputs = _str_list(col, raw, "in", npath)
        if "dims" in raw:
            dims = raw["dims"]
            if isinstance(dims, dict):
                node.dims = dict(dims)
                node.dims_where = {k: _where(col.file, dims, k, f"{npath}.dims.{k}") for k in dims}
            else:
                col.add(
                    raw,
                    "dims",
                    f"{npath}.dims",
                    "dims must be a mapping of parameter → dim expression",
                    expected="mapping",
                    got=type_name(dims),
                    value=True,
                )
        for k in ("path", "role"):
            if k in raw and col.type(raw, k, npath, (str,), "a string"):
                setattr(node, k, raw[k])
        node.weight_axes = raw.get("weight_axes")
        if "weight_axes" in raw:
            node.weight_axes_where = _where(col.file, raw, "weight_axes", f"{npath}.weight_axes")
        if node.weight_axes is not None and not isinstance(node.weight_axes, list):
            col.add(
                raw,
                "weight_axes",
                f"{npath}.weight_axes",
                "weight_axes must be a list (one entry per weight axis)",
                expected="list",
                got=type_name(node.weight_axes),
                value=True,
            )
        nodes[name] = node
    return nodes


# --------------------------------------------------------------------------- registries


def load_dims_table(path: Path) -> dict[str, dict]:
    data = load_yaml(path)
    col = Collector(str(path))
    out: dict[str, dict] = {}
    if col.keys(data, "$", data.keys() if isinstance(data, dict) else (), what="dim"):
        for name, entry in data.items():
            p = f"$.{name}"
            if col.keys(entry, p, DIMS_ENTRY_KEYS, ("kind",), what="dim field"):
                if entry.get("kind") not in DIM_KINDS:
                    col.add(
                        entry,
                        "kind",
                        f"{p}.kind",
                        f"unknown dim kind {entry.get('kind')!r}",
                        expected=" | ".join(DIM_KINDS),
                        got=type_name(entry.get("kind")),
                        value=True,
                    )
                out[name] = {
                    "kind": entry.get("kind"),
                    "shardable_by": list(entry.get("shardable_by") or []),
                    "doc": entry.get("doc", ""),
                }
    if col.issues:
        raise SpecError(issues=col.issues)
    return out


def load_roles(path: Path) -> dict[str, dict]:
    data = load_yaml(path)
    col = Collector(str(path))
    out: dict[str, dict] = {}
    if col.keys(data, "$", data.keys() if isinstance(data, dict) else (), what="role"):
        for name, entry in data.items():
            if col.keys(entry, f"$.{name}", ROLE_KEYS, what="role field"):
                out[name] = {"doc": entry.get("doc", ""), "container": bool(entry.get("container", False))}
    if col.issues:
        raise SpecError(issues=col.issues)
    return out


# --------------------------------------------------------------------------- components


def parse_component(path: Path, data: Any | None = None) -> tuple[ComponentSpec | None, Collector]:
    data = load_yaml(path) if data is None else data
    col = Collector(str(path))
    if not col.keys(data, "$", COMPONENT_KEYS, ("component", "role", "inputs", "graph", "outputs")):
        return None, col
    name = data.get("component")
    if isinstance(name, str) and name != path.stem:
        col.add(
            data,
            "component",
            "$.component",
            "component name must equal the file name",
            expected=path.stem,
            got=name,
            value=True,
        )
    role = data.get("role") if isinstance(data.get("role"), str) else ""
    if "role" in data:
        col.type(data, "role", "$", (str,), "a role name")
    slots: dict[str, str] = {}
    if "slots" in data:
        raw_slots = data["slots"]
        if isinstance(raw_slots, dict) and all(
            isinstance(v, str) or (isinstance(v, list) and all(isinstance(r, str) for r in v))
            for v in raw_slots.values()
        ):
            slots = {k: [v] if isinstance(v, str) else list(v) for k, v in raw_slots.items()}
        else:
            col.add(
                data,
                "slots",
                "$.slots",
                "slots must map slot name → role (or list of roles)",
                expected="mapping of strings",
                got=type_name(raw_slots),
                value=True,
            )
    # a missing graph is reported as a missing required key; do not report it twice
    graph = _parse_graph(col, data, "$.graph", allow_slot=True, allow_stack=False) if "graph" in data else {}
    spec = ComponentSpec(
        name=path.stem,
        file=str(path),
        role=role,
        inputs=_str_list(col, data, "inputs", "$") if "inputs" in data else [],
        reads=_str_list(col, data, "reads", "$") if "reads" in data else [],
        graph=graph,
        outputs=_str_list(col, data, "outputs", "$") if "outputs" in data else [],
        slots=slots,
        doc=str(data.get("doc", "")),
        where={k: _where(str(path), data, k, f"$.{k}") for k in data},
    )
    if "decode_variant" in data and col.type(data, "decode_variant", "$", (str,), "a component name"):
        spec.decode_variant = data["decode_variant"]
    if "cache" in data:
        cache = data["cache"]
        if col.keys(cache, "$.cache", CACHE_KEYS, ("entries",), at=(data, "cache")):
            spec.cache_family = str(cache.get("family", "kv"))
            entries = cache.get("entries")
            if not isinstance(entries, list):
                col.add(
                    cache,
                    "entries",
                    "$.cache.entries",
                    "cache entries must be a list",
                    expected="list",
                    got=type_name(entries),
                    value=True,
                )
                entries = []
            for i, entry in enumerate(entries):
                p = f"$.cache.entries[{i}]"
                if col.keys(entry, p, CACHE_ENTRY_KEYS, ("node", "kind"), at=(entries, i)):
                    growth = entry.get("growth", "per_token")
                    if growth not in CACHE_GROWTHS:
                        col.add(
                            entry,
                            "growth",
                            f"{p}.growth",
                            f"unknown cache growth {growth!r}",
                            expected=" | ".join(CACHE_GROWTHS),
                            got=type_name(growth),
                            value=True,
                        )
                    for g, param in CACHE_GROWTH_PARAM.items():
                        if (growth == g) != (param in entry):
                            col.add(
                                entry,
                                param if param in entry else None,
                                f"{p}.{param}",
                                f"'{param}:' goes with growth '{g}'"
                                + ("" if param in entry else ", which needs it (how many positions)"),
                                hint=f"write growth: {g}, {param}: <dim>"
                                if param in entry
                                else f"add '{param}: <dim expression>' to the entry",
                            )
                    dtype, scale_dtype, scale_block = _cache_dtype_rule(col, entry, p)
                    spec.cache.append(
                        CacheEntry(
                            str(entry.get("node")),
                            str(entry.get("kind")),
                            growth,
                            _where(str(path), entry, None, p),
                            entry.get("window"),
                            entry.get("ratio"),
                            entry.get("chunk"),
                            dtype,
                            scale_dtype,
                            scale_block,
                        )
                    )
    return spec, col


def _cache_dtype_rule(col: Collector, entry: Any, p: str) -> tuple[str, str | None, int | None]:
    """A cache entry's ``dtype:`` rule (default ``kv``) and ``scale: {dtype, per}``.  Whether a
    fixed dtype names a row of the dtypes table is checked by the evaluator."""
    dtype = entry.get("dtype", "kv")
    if not isinstance(dtype, str) or not dtype:
        col.add(
            entry,
            "dtype",
            f"{p}.dtype",
            "a cache dtype rule is a name",
            expected="kv | act | a fixed dtype (fp32, bf16, fp8, ...)",
            got=type_name(dtype),
            value=True,
        )
        return "kv", None, None
    scale = entry.get("scale")
    if scale is None:
        return dtype, None, None
    if not col.keys(scale, f"{p}.scale", CACHE_SCALE_KEYS, CACHE_SCALE_KEYS, at=(entry, "scale")):
        return dtype, None, None
    per = scale.get("per")
    ok = True
    if dtype in CACHE_DTYPE_RULES:
        col.add(
            entry,
            "scale",
            f"{p}.scale",
            f"a scale goes with a fixed cache dtype, not the rule '{dtype}'",
            hint="write dtype: fp8, scale: { dtype: fp32, per: 128 }",
        )
        ok = False
    if not isinstance(per, int) or isinstance(per, bool) or per <= 0:
        col.add(
            scale,
            "per",
            f"{p}.scale.per",
            "scale.per is the elements per scale",
            expected="an integer > 0",
            got=type_name(per),
            value=True,
        )
        ok = False
    if not isinstance(scale.get("dtype"), str):
        col.add(
            scale,
            "dtype",
            f"{p}.scale.dtype",
            "scale.dtype is a dtype name",
            expected="fp32, ...",
            got=type_name(scale.get("dtype")),
            value=True,
        )
        ok = False
    return (dtype, str(scale["dtype"]), int(per)) if ok else (dtype, None, None)


# --------------------------------------------------------------------------- models


def _slot_fill(col: Collector, obj: Any, key: str, path: str) -> SlotFill | None:
    raw = obj[key]
    where = _where(col.file, obj, key, path)
    if isinstance(raw, str):
        return SlotFill(raw, None, {}, where)
    if col.keys(raw, path, SLOT_FILL_KEYS, ("component",), at=(obj, key)):
        rename = raw.get("rename") or {}
        if not isinstance(rename, dict):
            col.add(
                raw,
                "rename",
                f"{path}.rename",
                "rename maps path segment → checkpoint segment",
                expected="mapping",
                got=type_name(rename),
                value=True,
            )
            rename = {}
        return SlotFill(str(raw.get("component")), raw.get("path"), {str(k): str(v) for k, v in rename.items()}, where)
    return None


def _template_dims(col: Collector, raw: Any, tname: str, tpath: str, out: dict, out_where: dict) -> None:
    """``templates.<t>.dims: {dim: dim expression}``: the template's nodes read ``dim`` as the
    expression (a per-layer-type size, e.g. the sliding-window layers' KV heads).  Checked
    against the dims table when the template is expanded."""
    dims = raw[TEMPLATE_DIMS_KEY]
    if not isinstance(dims, dict) or not dims:
        col.add(
            raw,
            TEMPLATE_DIMS_KEY,
            f"{tpath}.dims",
            "template dims map a dim to the dim expression this template's nodes read instead",
            expected="non-empty mapping, e.g. {n_kv_heads: n_kv_heads_swa, window: 0}",
            got=type_name(dims),
            value=True,
        )
        return
    out[tname] = dict(dims)
    out_where[tname] = {k: _where(col.file, dims, k, f"{tpath}.dims.{k}") for k in dims}


def _merge(base: LocDict, child: LocDict) -> LocDict:
    """Child keys replace base keys; ``dims``, ``config_unused`` and ``omitted`` merge key by key.  Positions are kept."""
    out = LocDict(base)
    out.file, out.line, out.column = child.file, child.line, child.column
    out._key_pos = {**getattr(base, "_key_pos", {}), **getattr(child, "_key_pos", {})}
    out._val_pos = {**getattr(base, "_val_pos", {}), **getattr(child, "_val_pos", {})}
    for key, value in child.items():
        if key in ("dims", "config_unused", "omitted") and isinstance(value, dict) and isinstance(base.get(key), dict):
            value = _merge(base[key], value)
        if value is None:  # `key: null` in a derived model drops an inherited entry
            out.pop(key, None)
            continue
        out[key] = value
    out.pop("extends", None)
    return out


_CATALOG_MODELS = Path(__file__).parents[1] / "specs" / "models"


def _resolve_extends(path: Path, data: Any, col: Collector, seen: tuple[Path, ...] = ()) -> Any:
    """A model may ``extends: OTHER`` (a model in the same folder, else in the catalog): a
    derived model is data."""
    if not isinstance(data, dict) or "extends" not in data:
        return data
    parent = data["extends"]
    if not isinstance(parent, str) or not parent or any(c in parent for c in "/\\\x00") or parent in (".", ".."):
        col.add(
            data,
            "extends",
            "$.extends",
            "extends names a model by its name (the stem of a .yaml file next to this one or in the catalog)",
            expected="a model name",
            got=type_name(parent),
            value=True,
        )
        return data
    base_path = path.with_name(f"{parent}.yaml")
    if parent == data.get("model") or base_path.resolve() == path.resolve():
        col.add(
            data,
            "extends",
            "$.extends",
            f"model {parent!r} extends itself",
            hint="extends names another model, the one this model is derived from",
            value=True,
        )
        return data
    if not base_path.exists() and (_CATALOG_MODELS / f"{parent}.yaml").exists():
        base_path = _CATALOG_MODELS / f"{parent}.yaml"  # a derived model outside the catalog extends a catalog model
    if not base_path.exists():
        col.add(
            data,
            "extends",
            "$.extends",
            f"extends names model {parent!r}, which has no file {base_path.name} next to this one",
            hint=did_you_mean(str(parent), [p.stem for p in path.parent.glob("*.yaml")]),
            value=True,
        )
        return data
    chain = (*seen, path.resolve())
    if base_path.resolve() in chain:
        col.add(
            data,
            "extends",
            "$.extends",
            "extends chain forms a cycle: " + " → ".join(p.stem for p in (*chain, base_path)),
            hint="one model of the chain must extend none of the others",
            value=True,
        )
        return data
    base = _resolve_extends(base_path, load_yaml(base_path), col, chain)
    return _merge(base, data) if isinstance(base, dict) else data


_SRC_FRAGMENT = re.compile(r"`[^`]+`")
SRC_EXAMPLE = 'src: "shared layers reuse the previous full layer\'s top-k: `topk_indices = prev_topk_indices`"'


def _parse_streams(col: Collector, stack: Any, streams: Any, sname: str, spath: str) -> dict[str, StreamSpec]:
    """``stacks.<s>.streams``: the carried residual, internal and append streams (closed keys,
    each kind's keys checked together; the layer lists and node paths are checked when the
    stack is expanded, where the schedule and the templates are known)."""
    out: dict[str, StreamSpec] = {}
    if not col.keys(
        streams,
        f"{spath}.streams",
        streams.keys() if isinstance(streams, dict) else (),
        what="stream",
        at=(stack, "streams"),
    ):
        return out
    carried: str | None = None
    for name, st in streams.items():
        p = f"{spath}.streams.{name}"
        spec = _stream_head(col, streams, name, st, p)
        if spec is None:
            continue
        if st.get("carries") is True:
            spec.kind = "carried"
            _check_carried(col, st, name, p, sname, carried)
            carried = carried or name
            out[name] = spec
            continue
        if "carries" in st and st["carries"] is not False:
            col.type(st, "carries", p, (bool,), "true (the carried residual) or false")
        if spec.source is None:
            if "from" not in st:
                col.add(
                    st,
                    None,
                    p,
                    f"stream '{name}' needs 'from:' (the node whose value crosses layers) or 'carries: true'",
                    hint="an internal stream: { from: <slot.node path in a template>, src: … }; "
                    "the residual: { carries: true }",
                )
            continue
        _stream_archive(col, st, name, p, spec)
        _stream_read_axis(col, st, p, spec)
        _stream_src(col, st, name, p, spec)
        out[name] = spec
    return out


def _stream_head(col: Collector, streams: Any, name: Any, st: Any, p: str) -> StreamSpec | None:
    """A stream's name and closed keys, and its ``from`` / ``src`` / ``read`` strings (None:
    the declaration is too broken to read further)."""
    where = _where(col.file, streams, name, p)
    if not isinstance(name, str) or not name.replace("_", "a").isalnum():
        col.add(streams, name, p, f"stream name {name!r} must be an identifier", hint="use letters, digits and '_'")
        return None
    if not col.keys(st, p, STREAM_KEYS, what="stream field", at=(streams, name)):
        return None
    spec = StreamSpec(name, "internal", where, {k: _where(col.file, st, k, f"{p}.{k}") for k in st})
    for key in ("from", "src", "read"):
        if key in st and col.type(st, key, p, (str,), "a string"):
            setattr(spec, {"from": "source"}.get(key, key), st[key])
    return spec


def _check_carried(col: Collector, st: Any, name: str, p: str, sname: str, carried: str | None) -> None:
    """The carried residual takes no archive keys, and a stack carries exactly one."""
    extra = [k for k in ("from", "after", "before", "read", "axis") if k in st]
    if extra:
        col.add(
            st,
            extra[0],
            f"{p}.{extra[0]}",
            f"the carried stream '{name}' is each layer's input and output; "
            f"'{extra[0]}:' belongs to an internal or append stream",
            hint=f"declare another stream for it, e.g. streams: {{ {name}_archive: "
            "{ from: " + name + ", after: [i, …], read: concat, src: … } }",
        )
    if carried is not None:
        col.add(
            st,
            "carries",
            f"{p}.carries",
            f"stack '{sname}' declares a second carried stream '{name}' (the first is '{carried}')",
            expected="exactly one stream with carries: true (the residual)",
            got=f"{carried}, {name}",
            hint="a multi-copy residual (hyper-connections) is ONE carried stream with an extra axis; "
            "another cross-layer value is an internal stream ({ from: <node path>, src: … }) "
            "or an append stream ({ from: …, after: [i, …], read: each | all | concat, src: … })",
        )


def _stream_archive(col: Collector, st: Any, name: str, p: str, spec: StreamSpec) -> None:
    """``after:`` / ``before:`` make an append stream (which needs ``read:``); without them
    ``read:`` and ``axis:`` do not belong."""
    at = [k for k in ("after", "before") if k in st]
    if len(at) == 2:
        col.add(
            st,
            "before",
            f"{p}.before",
            f"stream '{name}' archives either at layer exit ('after:') or at layer entry ('before:'), not both",
            hint="declare two streams to archive both",
        )
    if at:
        spec.kind, spec.at, spec.layers = "append", at[0], st[at[0]]
        if "read" not in st:
            col.add(
                st,
                None,
                p,
                f"append stream '{name}' needs 'read:' (how readers consume the archive)",
                expected=" | ".join(STREAM_READS),
                hint="read: each (the j-th reading layer gets the j-th element), all (every element archived "
                "so far), concat (the elements joined along 'axis:')",
            )
    elif "read" in st or "axis" in st:
        key = "read" if "read" in st else "axis"
        col.add(
            st,
            key,
            f"{p}.{key}",
            f"'{key}:' belongs to an append stream, which archives chosen layers",
            hint=f"add 'after: [i, …]' (archive at layer exit) or 'before: [i, …]' (at layer entry) to "
            f"stream '{name}'; without them it is an internal stream: a later layer reads the latest value",
        )


def _stream_read_axis(col: Collector, st: Any, p: str, spec: StreamSpec) -> None:
    """A known read mode, and an integer ``axis:`` where the mode takes one."""
    if spec.read is not None and spec.read not in STREAM_READS:
        col.add(
            st,
            "read",
            f"{p}.read",
            f"unknown read mode {spec.read!r}",
            expected=" | ".join(STREAM_READS),
            got=type_name(spec.read),
            hint=did_you_mean(spec.read, STREAM_READS),
            value=True,
        )
    if "axis" not in st:
        return
    if isinstance(st["axis"], int) and not isinstance(st["axis"], bool):
        spec.axis = st["axis"]
        if spec.read == "each":
            col.add(
                st,
                "axis",
                f"{p}.axis",
                "'axis:' goes with read: all (where the history axis goes) or read: concat (the axis joined)",
                hint="read: each hands each reader one element whole; remove 'axis:'",
            )
    else:
        col.type(st, "axis", p, (int,), "an axis index (negative counts from the end)")


def _stream_src(col: Collector, st: Any, name: str, p: str, spec: StreamSpec) -> None:
    """``src:``, a sentence quoting the forward source in back-quotes."""
    if "src" not in st:
        col.add(
            st,
            None,
            p,
            f"stream '{name}' needs 'src:': a sentence plus a back-quoted fragment of the model's forward "
            "source (checked against the source at validation)",
            hint=SRC_EXAMPLE,
        )
    elif spec.src is not None and not _SRC_FRAGMENT.search(spec.src):
        col.add(
            st,
            "src",
            f"{p}.src",
            "src must quote the forward source in back-quotes",
            expected="a sentence plus a `code fragment`",
            got=type_name(spec.src),
            hint=SRC_EXAMPLE,
            value=True,
        )


def parse_model(path: Path, data: Any | None = None) -> tuple[ModelSpec | None, Collector]:
    """A model file: its keys checked, then its dims, slot fills, templates, stacks and graph."""
    data = load_yaml(path) if data is None else data
    col = Collector(str(path))
    before = len(col.issues)
    data = _resolve_extends(path, data, col)
    # when the extends: target cannot be read, the inherited keys are missing: say only that
    required = () if len(col.issues) > before else ("model", "config", "dims", "templates", "graph", "outputs")
    if not col.keys(data, "$", MODEL_KEYS, required):
        return None, col
    for k in ("model", "config"):
        if k in data or k in required:
            col.type(data, k, "$", (str,), "a string")
    dims = _model_dims(col, data)
    components = _model_components(col, data)
    templates, templates_where, template_dims, template_dims_where = _model_templates(col, data)
    stacks = _model_stacks(col, data)
    graph = _parse_graph(col, data, "$.graph", allow_slot=False, allow_stack=True) if "graph" in data else {}
    spec = ModelSpec(
        name=str(data.get("model")),
        file=str(path),
        hf_id=str(data.get("hf_id", data.get("model"))),
        config_file=str(data.get("config")),
        dims=dict(dims),
        dims_where={k: _where(col.file, dims, k, f"$.dims.{k}") for k in dims},
        components=components,
        templates=templates,
        templates_where=templates_where,
        template_dims=template_dims,
        template_dims_where=template_dims_where,
        quant_context=data.get("quant_context"),
        buffers=data.get("buffers"),
        stacks=stacks,
        inputs=_str_list(col, data, "inputs", "$") if "inputs" in data else ["input_ids"],
        graph=graph,
        outputs=_str_list(col, data, "outputs", "$") if "outputs" in data else [],
        doc=str(data.get("doc", "")),
        where={k: _where(col.file, data, k, f"$.{k}") for k in data},
        source=_str_list(col, data, "source", "$") if "source" in data else [],
        config_unused=_config_unused(col, data),
        omitted=_omitted(col, data),
    )
    return spec, col


def _omitted(col: Collector, data: LocDict) -> dict[str, OmittedPart]:
    """``omitted:``, part name → ``{tensors: [glob, …], config: [key, …], reason: text}``."""
    raw = data.get("omitted")
    if raw is None:
        return {}
    example = (
        "omitted: { vision_tower: { tensors: ['model.visual.*'], config: [vision_config], "
        "reason: the vision encoder is not modelled } }"
    )
    if not isinstance(raw, dict):
        col.add(data, "omitted", "$.omitted", "omitted must map a part name → {tensors, config, reason}",
                expected="mapping", got=type_name(raw), hint=example, value=True)  # fmt: skip
        return {}
    out = {}
    for name, part in raw.items():
        path = f"$.omitted.{name}"
        if not isinstance(part, dict):
            col.add(raw, name, path, f"omitted part '{name}' must be a mapping",
                    expected="{tensors, config, reason}", got=type_name(part), hint=example, value=True)  # fmt: skip
            continue
        ok = True
        for key in part:
            if key not in OMITTED_KEYS:
                col.add(part, key, f"{path}.{key}", f"unknown key '{key}' in omitted part '{name}'",
                        hint=did_you_mean(str(key), OMITTED_KEYS) or f"keys: {', '.join(OMITTED_KEYS)}")  # fmt: skip
                ok = False
        lists = {}
        for key in ("tensors", "config"):
            value = part.get(key, [])
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                col.add(part, key, f"{path}.{key}", f"{key} of omitted part '{name}' must be a list of names",
                        expected="a list of strings", got=type_name(value), hint=example, value=True)  # fmt: skip
                ok = False
                continue
            lists[key] = tuple(value)
        if ok and not lists.get("tensors") and not lists.get("config"):
            col.add(raw, name, path, f"omitted part '{name}' names no tensors and no config keys",
                    hint=example, value=True)  # fmt: skip
            ok = False
        reason = part.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            col.add(part if "reason" in part else raw, "reason" if "reason" in part else name, f"{path}.reason",
                    f"say why part '{name}' is not modelled", expected="a reason (text)",
                    got=type_name(reason), hint=example, value=True)  # fmt: skip
            ok = False
        if ok:
            out[str(name)] = OmittedPart(
                str(name), lists["tensors"], lists["config"], reason, _where(col.file, raw, name, path)
            )
    return out


def _config_unused(col: Collector, data: LocDict) -> dict[str, str]:
    """``config_unused:``, config key (dotted for a nested one) → why the spec does not bind it."""
    raw = data.get("config_unused")
    if raw is None:
        return {}
    example = "config_unused: { max_window_layers: sliding windows are off (use_sliding_window is false) }"
    if not isinstance(raw, dict):
        col.add(data, "config_unused", "$.config_unused", "config_unused must map config key → reason",
                expected="mapping", got=type_name(raw), hint=example, value=True)  # fmt: skip
        return {}
    out = {}
    for key, why in raw.items():
        if not isinstance(why, str) or not why.strip():
            col.add(raw, key, f"$.config_unused.{key}", f"say why the spec does not bind config key '{key}'",
                    expected="a reason (text)", got=type_name(why), hint=example, value=True)  # fmt: skip
            continue
        out[str(key)] = why
    return out


def _model_dims(col: Collector, data: LocDict) -> Any:
    """``dims:``, dim → binding (a mapping; anything else is reported and read as empty)."""
    dims = data.get("dims")
    if isinstance(dims, dict):
        return dims
    if "dims" in data:
        col.add(
            data,
            "dims",
            "$.dims",
            "dims must map dim → binding",
            expected="mapping",
            got=type_name(dims),
            value=True,
        )
    return {}


def _model_components(col: Collector, data: LocDict) -> dict[str, SlotFill]:
    """``components:``, slot → the component filling it in every template."""
    components: dict[str, SlotFill] = {}
    if isinstance(data.get("components"), dict):
        for slot in data["components"]:
            fill = _slot_fill(col, data["components"], slot, f"$.components.{slot}")
            if fill:
                components[slot] = fill
    elif "components" in data:
        col.add(
            data,
            "components",
            "$.components",
            "components must map slot → component",
            expected="mapping",
            got=type_name(data["components"]),
            value=True,
        )
    return components


def _model_templates(col: Collector, data: LocDict):
    """``templates:``, template → its slot fills and ``dims:`` overrides: (fills, where,
    dim overrides, where of each override), each keyed by template."""
    templates: dict[str, dict[str, SlotFill]] = {}
    templates_where: dict[str, Where] = {}
    template_dims: dict[str, dict[str, Any]] = {}
    template_dims_where: dict[str, dict[str, Where]] = {}
    raw_templates = data.get("templates")
    if isinstance(raw_templates, dict) and raw_templates:
        for tname, raw in raw_templates.items():
            tpath = f"$.templates.{tname}"
            templates_where[tname] = _where(col.file, raw_templates, tname, tpath)
            raw = raw if raw is not None else {}
            if not isinstance(raw, dict):
                col.add(
                    raw_templates,
                    tname,
                    tpath,
                    "a template maps slot → component",
                    expected="mapping",
                    got=type_name(raw),
                    value=True,
                )
                continue
            fills = {}
            for slot in raw:
                if slot == TEMPLATE_DIMS_KEY:
                    _template_dims(col, raw, tname, tpath, template_dims, template_dims_where)
                    continue
                fill = _slot_fill(col, raw, slot, f"{tpath}.{slot}")
                if fill:
                    fills[slot] = fill
            templates[tname] = fills
    elif "templates" in data:
        col.add(
            data,
            "templates",
            "$.templates",
            "templates must be a non-empty mapping",
            expected="mapping",
            got=type_name(raw_templates),
            value=True,
        )
    return templates, templates_where, template_dims, template_dims_where


def _model_stacks(col: Collector, data: LocDict) -> dict[str, StackSpec]:
    """``stacks:``, stack → its repeat, streams, schedule and role."""
    stacks: dict[str, StackSpec] = {}
    raw_stacks = data.get("stacks") or {}
    if not isinstance(raw_stacks, dict):
        col.add(
            data,
            "stacks",
            "$.stacks",
            "stacks must be a mapping",
            expected="mapping",
            got=type_name(raw_stacks),
            value=True,
        )
        raw_stacks = {}
    for sname, raw in raw_stacks.items():
        spath = f"$.stacks.{sname}"
        if not col.keys(raw, spath, STACK_KEYS, ("repeat", "streams", "schedule"), at=(raw_stacks, sname)):
            continue
        streams = raw.get("streams")
        stream_specs = _parse_streams(col, raw, streams, sname, spath)
        role = raw.get("role", "decoder")
        if role not in STACK_ROLES:
            col.add(
                raw,
                "role",
                f"{spath}.role",
                f"unknown stack role {role!r}",
                expected=" | ".join(STACK_ROLES),
                got=type_name(role),
                value=True,
            )
        stacks[sname] = StackSpec(
            name=sname,
            repeat=raw.get("repeat"),
            path=str(raw.get("path", sname)),
            streams=dict(streams) if isinstance(streams, dict) else {},
            schedule=raw.get("schedule"),
            where=_where(col.file, raw_stacks, sname, spath),
            keys_where={k: _where(col.file, raw, k, f"{spath}.{k}") for k in raw},
            role=str(role),
            first_layer=raw.get("first_layer", 0),
            stream_specs=stream_specs,
        )
    return stacks
