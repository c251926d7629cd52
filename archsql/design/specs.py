"""Spec helpers shared by the design tools: YAML spec files written as data, which dims a
spec's expanded graph reads, slots of a model's templates, and located bad-input errors.

Probe models (component comparison) and derived models (the model editor) are ordinary
model YAML files; they are evaluated by :func:`archsql.evaluator.evaluate` like any catalog
model.  Which dims a spec needs is read from the engine's own expansion
(:func:`archsql.evaluator.expand.expand`), never from a second list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archsql.errors import DesignError, Issue, SpecError, did_you_mean, unknown_name
from archsql.schema.spec import ComponentSpec, ModelSpec, SlotFill, parse_model
from archsql.schema.tables import PHASES

# ---------------------------------------------------------------------------- YAML files


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str):
    style = ">" if "\n" in data or len(data) > 100 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def dump_yaml(data: dict[str, Any], header: str = "") -> str:
    """YAML text of a spec mapping, keys in the order given, after a ``#`` comment header."""
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)
    head = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) if header else ""
    return head + body


def write_spec(path: Path, data: dict[str, Any], header: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_yaml(data, header), encoding="utf-8")
    return path


def safe_stem(name: str) -> str:
    """A file stem for a model name (``gqa_attention@Meta-Llama-3.1-8B`` stays readable)."""
    return "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in name)


def fill_yaml(fill: SlotFill) -> Any:
    """A slot fill as it is written in a model file."""
    if fill.path is None and not fill.rename:
        return fill.component
    out: dict[str, Any] = {"component": fill.component}
    if fill.path is not None:
        out["path"] = fill.path
    if fill.rename:
        out["rename"] = dict(fill.rename)
    return out


# ---------------------------------------------------------------------------- dims a spec reads


@dataclass
class DimUsage:
    """What a model spec binds and what its expanded graph reads."""

    spec: ModelSpec
    bound: dict[str, int]  # dim -> value (the engine's bind_dims)
    used: dict[str, list[str]] = field(default_factory=dict)  # dim -> 'file:line $.path' sites

    @property
    def missing(self) -> list[str]:
        return sorted(d for d in self.used if d not in self.spec.dims)

    def unused(self, library) -> list[str]:
        """Bound dims nothing reads (context dims are metadata and never unused)."""
        return sorted(
            d
            for d in self.spec.dims
            if d in library.dims and d not in self.used and library.dims[d]["kind"] != "context"
        )


def dim_usage(path: Path, library) -> DimUsage:
    """Bind the spec's dims and expand it in every phase with the engine; collect the dims
    its nodes, stack repeats and schedule slices read, with where.  Problems other than
    unbound dims are the engine's located :class:`SpecError`."""
    from archsql.evaluator.bind import bind_dims, load_config
    from archsql.evaluator.expand import expand
    from archsql.schema.expr import RUNTIME_SYMBOLS, expr_names

    spec, col = parse_model(path)
    if spec is None or col.issues:
        raise SpecError(issues=col.issues)
    config = load_config(spec, library.configs_dir, col)
    bound = bind_dims(col, spec, config, library) if not col.issues else {}
    if col.issues:
        raise SpecError(issues=col.issues)
    usage = DimUsage(spec, bound)
    for phase in PHASES:
        program = expand(spec, library, bound, phase, col, config)
        if col.issues:
            raise SpecError(issues=list(dict.fromkeys(col.issues)))
        for node in program.nodes:
            for key, raw in node.dims.items():
                for text in raw if isinstance(raw, list) else [raw]:
                    if not isinstance(text, str):
                        continue
                    where = node.dims_where.get(key, node.where)
                    for name in expr_names(text) - set(RUNTIME_SYMBOLS):
                        site = f"{Path(where.file).name}:{where.line} {where.path}"
                        sites = usage.used.setdefault(name, [])
                        if site not in sites:
                            sites.append(site)
        for st in program.stacks.values():
            for sym in st.repeat_expr.free_symbols:
                usage.used.setdefault(str(sym), []).append(f"{Path(spec.file).name} $.stacks.{st.spec.name}.repeat")
            for entry in st.spec.schedule if isinstance(st.spec.schedule, list) else ():
                layers = entry.get("layers") if isinstance(entry, dict) else None
                if isinstance(layers, str):
                    for part in layers.split(":"):
                        for name in expr_names(part) if part.strip() else ():
                            usage.used.setdefault(name, []).append(
                                f"{Path(spec.file).name} $.stacks.{st.spec.name}.schedule"
                            )
    return usage


def missing_dims_error(
    model: str, missing: list[str], usage: DimUsage, library, spec_file: Path | None, how: str
) -> DesignError:
    """Every unbound dim, where it is read and where to bind it — dims are never defaulted."""
    issues = []
    for dim in missing:
        entry = library.dims.get(dim, {})
        at = ", ".join(usage.used.get(dim, [])[:3])
        issues.append(
            Issue(
                f"dim '{dim}' ({entry.get('kind', '?')}: {entry.get('doc', '')}) is read at {at} but not bound",
                file=str(spec_file) if spec_file else None,
                path="$.dims",
                hint=f"bind it: {how.format(dim=dim)}",
            )
        )
    return DesignError(
        f"{model}: {len(missing)} dim{'s' if len(missing) != 1 else ''} not bound: {', '.join(missing)} "
        "(dims are never defaulted)",
        issues,
    )


# ---------------------------------------------------------------------------- slots and fills


@dataclass(frozen=True)
class SlotSite:
    """A slot some template's expansion reaches: the block component declaring it and the
    roles it takes."""

    slot: str
    block: str  # component declaring the slot
    accepts: tuple[str, ...]
    where: Any  # Where of the block's `slots:` declaration


def effective_fills(spec: ModelSpec, template: str) -> dict[str, SlotFill]:
    """The slot fills a template expands with (model-wide ``components`` under the template's own)."""
    return {**spec.components, **spec.templates.get(template, {})}


def template_slots(spec: ModelSpec, template: str, library) -> dict[str, SlotSite]:
    """Slots a template's expansion reaches, walking from its block through filled slots."""
    fills = effective_fills(spec, template)
    out: dict[str, SlotSite] = {}

    def walk(comp: ComponentSpec, seen: tuple[str, ...]) -> None:
        for node in comp.graph.values():
            if node.slot is None or node.slot in out:
                continue
            out[node.slot] = SlotSite(
                node.slot, comp.name, tuple(comp.slots.get(node.slot, ())), comp.where.get("slots")
            )
            fill = fills.get(node.slot)
            if fill is not None and fill.component not in seen and fill.component in library.component_files:
                walk(library.component(fill.component), (*seen, fill.component))

    block = fills.get("block")
    if block is not None and block.component in library.component_files:
        walk(library.component(block.component), (block.component,))
    return out


def require_component(name: str, library, context: str) -> ComponentSpec:
    """The library component ``name``; an unknown name is a :class:`DesignError` that says
    where it was written and suggests the closest name."""
    if name not in library.component_files:
        message, hint = unknown_name("component", name, library.component_files)
        raise DesignError(f"{context}: {message}", [Issue(message, hint=hint + " (archsql/specs/components/)")])
    return library.component(name)


def role_error(comp: ComponentSpec, site: SlotSite, context: str) -> DesignError:
    where = site.where
    return DesignError(
        f"{context}: component '{comp.name}' has role '{comp.role}', but slot '{site.slot}' of "
        f"'{site.block}' takes {' | '.join(site.accepts)}",
        [
            Issue(
                f"slot '{site.slot}' accepts roles {', '.join(site.accepts)}",
                file=getattr(where, "file", None),
                line=getattr(where, "line", None),
                column=getattr(where, "column", None),
                path=f"$.slots.{site.slot}",
                expected=" | ".join(site.accepts),
                got=comp.role,
                hint=f"swap '{site.slot}' for a component of role {' or '.join(site.accepts)}, "
                f"or fill the slot that takes role '{comp.role}'",
            )
        ],
    )


def unknown_choice(kind: str, name: str, choices, context: str, hint_extra: str = "") -> DesignError:
    message, _ = unknown_name(kind, name, choices)
    known = sorted(set(map(str, choices)))
    listed = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
    hint = did_you_mean(name, known)
    return DesignError(
        f"{context}: {message}", [Issue(f"known {kind}s: {listed}{hint_extra}", hint=hint)] if known else []
    )


def component_dim_names(comp: ComponentSpec, library) -> set[str]:
    """Dims a component's nodes (and its decode variant's) name in their dims."""
    from archsql.schema.expr import RUNTIME_SYMBOLS, ExprSyntaxError, expr_names

    names: set[str] = set()
    seen: set[str] = set()
    while comp is not None and comp.name not in seen:
        seen.add(comp.name)
        for node in comp.graph.values():
            for raw in node.dims.values():
                for text in raw if isinstance(raw, list) else [raw]:
                    if isinstance(text, str):
                        try:
                            names |= expr_names(text)
                        except ExprSyntaxError:
                            continue
        comp = library.component(comp.decode_variant) if comp.decode_variant else None
    return names - set(RUNTIME_SYMBOLS)


def parse_assignments(items, what: str = "--set") -> dict[str, Any]:
    """``["n_kv_heads=4", "window=config.sliding_window"]`` → {dim: int or binding text}.
    A dim given twice is an error naming both."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    issues = []
    for item in items:
        dim, sep, value = str(item).partition("=")
        dim, value = dim.strip(), value.strip()
        if not sep or not dim or not value:
            issues.append(Issue(f"{what} {item!r} is not DIM=VALUE", hint="e.g. --set n_kv_heads=4"))
            continue
        if dim in out:
            issues.append(
                Issue(
                    f"dim '{dim}' is bound twice: {what} {given[dim]} and {what} {item}",
                    hint="bind each dim once",
                )
            )
            continue
        given[dim] = str(item)
        out[dim] = int(value) if value.lstrip("-").isdigit() else value
    if issues:
        raise DesignError(f"{len(issues)} bad {what} argument{'s' if len(issues) != 1 else ''}", issues)
    return out


def check_dim_names(dims, library, what: str) -> None:
    bad = [d for d in dims if d not in library.dims]
    if bad:
        raise DesignError(
            f"unknown dim{'s' if len(bad) != 1 else ''} in {what}: {', '.join(bad)}",
            [
                Issue(
                    f"unknown dim '{d}'",
                    hint=(did_you_mean(d, library.dims) or "see archsql/specs/dims.yaml")
                    + " (dims are declared in archsql/specs/dims.yaml)",
                )
                for d in bad
            ],
        )
