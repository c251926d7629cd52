"""The model editor: swap components in chosen layer groups, set dims, see old → new.

An edit is data: a **derived model** — ``extends: BASE`` plus the overrides (dims set, dims
no node reads any more dropped with ``null``, the templates with the swapped slot fills) —
written as YAML that the library loads like any model (``archsql build path.yaml``).  Dims
the new components read are never defaulted: each must be set (``--set``) or taken from a
donor model's bindings (``--dims-from``), and a missing one is an error naming the dim,
where it is read and how to bind it.

The derived model is evaluated by the one engine, written to the design store beside its
base, and the ledger is read from the views (``archsql/design/sql/edit_ledger.sql``): for
every layer group (block template) and for the whole model, params, weight bytes, prefill
FLOPs at a context, KV bytes per token and per request at that context, and SOL step times
on a deployment — old, new, delta and ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql.design import store as dstore
from archsql.design.diff import diff_analyses
from archsql.design.specs import (
    check_dim_names,
    dim_usage,
    effective_fills,
    fill_yaml,
    missing_dims_error,
    require_component,
    role_error,
    safe_stem,
    template_slots,
    unknown_choice,
    write_spec,
)
from archsql.errors import DesignError, Issue
from archsql.schema.spec import SlotFill

DEFAULT_DEPLOYMENT = "8xH200-tp8-ep8"


@dataclass(frozen=True)
class Swap:
    """Fill ``slot`` with ``component`` in ``templates`` (None: every template whose
    expansion has the slot)."""

    slot: str
    component: str
    templates: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, text: str, templates: tuple[str, ...] | None = None) -> Swap:
        slot, sep, component = text.partition("=")
        if not sep or not slot.strip() or not component.strip():
            raise DesignError(
                f"--swap {text!r} is not SLOT=COMPONENT", [Issue("e.g. --swap attention=mla_dsa_attention")]
            )
        return cls(slot.strip(), component.strip(), templates)


@dataclass
class DerivedModel:
    """A derived model spec: its name, file and what it changes."""

    name: str
    base: str
    path: Path
    data: dict[str, Any]
    swapped: dict[str, tuple[str, str]] = field(default_factory=dict)  # "template.slot" -> (old, new)
    dims_set: dict[str, Any] = field(default_factory=dict)  # dim -> binding written
    provenance: dict[str, str] = field(default_factory=dict)  # dim -> where its binding came from
    dims_dropped: tuple[str, ...] = ()
    # the derived model as the engine evaluated it when it was checked (edit_model's "new")
    analysis: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class EditReport:
    derived: DerivedModel
    db: Path
    context: int
    batch: int
    dtype: str  # the KV dtype of every row (the deployment's, or --dtype)
    deployment: str  # the deployment of the SOL and device-memory rows
    ledger: pa.Table  # scope, template, layers_old/new, quantity, unit, old, new, delta, ratio
    weight_profile: str = "native"  # the profile every weight-bytes row is stored in (the deployment's)

    def to_polars(self):
        import polars as pl

        return pl.from_arrow(self.ledger)


# ---------------------------------------------------------------------------- derive


def derive(
    base: str | Path,
    *,
    swaps: list[Swap] | tuple[Swap, ...] = (),
    set_dims: dict[str, Any] | None = None,
    dims_from: str | None = None,
    name: str | None = None,
    out_dir: str | Path = "designs",
    library=None,
) -> DerivedModel:
    """Write the derived model of ``base`` with ``swaps`` and ``set_dims`` applied and check
    it: every dim its graph reads is bound (``dims_from`` binds the rest from another model's
    bindings evaluated against that model's config), and it evaluates."""
    from archsql.specs import default_library

    library = library or default_library()
    spec = library.model(base)
    set_dims = dict(set_dims or {})
    check_dim_names(set_dims, library, "--set")
    if not swaps and not set_dims:
        raise DesignError(f"{spec.name}: nothing to edit", [Issue("give --swap SLOT=COMPONENT and/or --set DIM=VALUE")])
    templates = {t: dict(spec.templates[t]) for t in spec.templates}
    swapped: dict[str, tuple[str, str]] = {}
    for swap in swaps:
        _apply_swap(spec, swap, templates, swapped, library)
    name = name or _default_name(spec.name, swaps, set_dims)
    path = Path(out_dir) / f"{safe_stem(name)}.yaml"
    data: dict[str, Any] = {
        "model": name,
        "extends": spec.name,
        "doc": _doc(spec.name, swapped, set_dims),
        "dims": dict(set_dims),
        "templates": {t: _template_yaml(spec, t, fills) for t, fills in templates.items()},
    }
    provenance = {d: "--set" for d in set_dims}
    derived = DerivedModel(name, spec.name, path, data, swapped, dict(set_dims), provenance)
    existed = path.exists()
    try:
        _complete(derived, set_dims, dims_from, library)
    except BaseException:
        if not existed:
            path.unlink(missing_ok=True)  # no half-bound draft is left behind
        raise
    return derived


def _complete(derived: DerivedModel, set_dims: dict[str, Any], dims_from: str | None, library) -> None:
    """Bind what the edited graph reads, drop what it no longer reads, and evaluate."""
    from archsql.evaluator import evaluate

    name, path, data, provenance = derived.name, derived.path, derived.data, derived.provenance
    _write(derived)
    usage = dim_usage(path, library)
    missing = usage.missing
    if missing and dims_from:
        donor = _donor_values(dims_from, library)
        for dim in missing:
            if dim in donor:
                value, binding = donor[dim]
                data["dims"][dim] = value
                derived.dims_set[dim] = value
                provenance[dim] = f"{dims_from}: {binding} = {value}"
        _write(derived)
        usage = dim_usage(path, library)
        missing = usage.missing
    if missing:
        donor_hint = f" (--dims-from {dims_from} does not bind it)" if dims_from else " or --dims-from MODEL"
        raise missing_dims_error(
            name,
            missing,
            usage,
            library,
            None,
            how=f"--set {{dim}}=<number or config.<key>>{donor_hint}; in the YAML: dims: {{{{ {{dim}}: <value> }}}}",
        )
    unused = usage.unused(library)
    explicit = sorted(d for d in unused if d in set_dims)
    if explicit:
        raise DesignError(
            f"{name}: no node reads {', '.join(explicit)} after the edit",
            [Issue(f"--set {d}=… binds a dim nothing uses", hint=f"drop --set {d}") for d in explicit],
        )
    for dim in unused:
        data["dims"][dim] = None  # a stale binding of the swapped-out component
    derived.dims_dropped = tuple(unused)
    _write(derived)
    derived.analysis = evaluate(path, library=library)  # the engine has the last word (located errors)


def _apply_swap(spec, swap: Swap, templates: dict, swapped: dict, library) -> None:
    context = f"--swap {swap.slot}={swap.component}"
    comp = require_component(swap.component, library, context)
    sites = {t: template_slots(spec, t, library) for t in spec.templates}
    with_slot = [t for t, slots in sites.items() if swap.slot in slots]
    if not with_slot:
        known = sorted({s for slots in sites.values() for s in slots})
        raise unknown_choice("slot", swap.slot, known, f"{context}: {spec.name}", f" ({spec.name}'s slots)")
    chosen = list(swap.templates) if swap.templates else with_slot
    for t in chosen:
        if t not in spec.templates:
            raise unknown_choice("template", t, spec.templates, f"{context}: {spec.name}")
        if swap.slot not in sites[t]:
            raise DesignError(
                f"{context}: template '{t}' of {spec.name} has no slot '{swap.slot}'",
                [Issue(f"its slots: {', '.join(sorted(sites[t]))}", hint=f"templates with it: {', '.join(with_slot)}")],
            )
        site = sites[t][swap.slot]
        if site.accepts and comp.role not in site.accepts:
            raise role_error(comp, site, context)
        old = effective_fills(spec, t).get(swap.slot)
        fill = SlotFill(comp.name, old.path if old else None, {}, old.where if old else None)
        templates[t][swap.slot] = fill
        swapped[f"{t}.{swap.slot}"] = (old.component if old else "(empty)", comp.name)


def _template_yaml(spec, template: str, fills: dict[str, SlotFill]) -> dict[str, Any]:
    out: dict[str, Any] = {slot: fill_yaml(f) for slot, f in fills.items()}
    if spec.template_dims.get(template):
        out["dims"] = dict(spec.template_dims[template])
    return out


def _donor_values(donor: str, library) -> dict[str, tuple[int, str]]:
    """The donor model's dims bound against its own config: dim -> (value, binding)."""
    from archsql.evaluator.bind import bind_dims, load_config
    from archsql.schema.checks import Collector

    spec = library.model(donor)
    col = Collector(spec.file)
    config = load_config(spec, library.configs_dir, col)
    values = bind_dims(col, spec, config, library)
    if col.issues:
        from archsql.errors import SpecError

        raise SpecError(issues=col.issues)
    return {d: (v, str(spec.dims[d])) for d, v in values.items()}


def _default_name(base: str, swaps, set_dims) -> str:
    parts = [s.component for s in swaps] + [f"{d}{v}" for d, v in set_dims.items() if isinstance(v, int)]
    return f"{base}+{'+'.join(parts) or 'edit'}"


def _doc(base: str, swapped: dict, set_dims: dict) -> str:
    lines = [f"Derived from {base} by archsql edit."]
    for where, (old, new) in swapped.items():
        lines.append(f"{where}: {old} -> {new}.")
    for dim, value in set_dims.items():
        lines.append(f"{dim} = {value}.")
    return " ".join(lines)


def _write(derived: DerivedModel) -> None:
    header = [f"Derived model: {derived.name} = {derived.base} + edits (archsql edit)."]
    for where, (old, new) in derived.swapped.items():
        header.append(f"  swap {where}: {old} -> {new}")
    for dim, source in derived.provenance.items():
        header.append(f"  dim {dim}: {source}")
    for dim in derived.dims_dropped:
        header.append(f"  dim {dim}: null (no node reads it after the edit)")
    write_spec(derived.path, derived.data, "\n".join(header))


# ---------------------------------------------------------------------------- edit + ledger


def edit_model(
    base: str | Path,
    *,
    swaps: list[Swap] | tuple[Swap, ...] = (),
    set_dims: dict[str, Any] | None = None,
    dims_from: str | None = None,
    name: str | None = None,
    out_dir: str | Path = "designs",
    context: int | str = "64k",
    batch: int = 1,
    dtype: str | None = None,
    deployment: str = DEFAULT_DEPLOYMENT,
    db: str | Path | None = None,
    library=None,
    main_db: str | Path | None = None,
) -> EditReport:
    """Derive, evaluate base and derived model, and read the old → new ledger.

    ``deployment`` is a deployment of the store ``main_db`` (its deployments, meshes and GPUs
    are copied into the design store ``db``; without a store, the default deployments).  Every
    row is in one precision: weight bytes in the deployment's weight profile, KV bytes in its
    KV dtype — or in ``dtype``, which then replaces it for the SOL and device-memory rows too
    (a copy of the deployment named ``<deployment>+kv-<dtype>``)."""
    from archsql.evaluator import evaluate
    from archsql.specs import default_library

    library = library or default_library()
    context = dstore.parse_tokens(context)
    if dtype is not None:
        dstore.check_dtype(dtype)
    if batch < 1:
        raise DesignError(f"--batch must be positive, got {batch}")
    parameters = dstore.store_parameters(main_db)
    source = f" of {main_db}" if parameters is not None else " (no store: the defaults)"
    parameters = parameters or dstore.default_parameters()
    rows = {row["deployment"]: row for row in dstore.deployment_rows(parameters)}
    if deployment not in rows:
        raise unknown_choice("deployment", deployment, rows, f"--deployment{source}")
    chosen = rows[deployment]
    if dtype is not None and dtype != chosen["kv_dtype"]:  # one KV dtype in every row
        chosen = {**chosen, "deployment": f"{deployment}+kv-{dtype}", "kv_dtype": dtype}
        parameters = dstore.with_deployment_copy(parameters, chosen, like=deployment)
    dtype = chosen["kv_dtype"]
    parameters = dstore.only_deployments(parameters, [chosen["deployment"]])  # the ledger's: no other's rows
    derived = derive(
        base, swaps=swaps, set_dims=set_dims, dims_from=dims_from, name=name, out_dir=out_dir, library=library
    )
    old = evaluate(base, library=library)
    new = derived.analysis or evaluate(derived.path, library=library)  # evaluated by derive's check
    if old.model == new.model:
        raise DesignError(f"the derived model must have its own name, got '{new.model}' (the base's)")
    db = dstore.design_db(db)
    dstore.write(
        db,
        [old, new],
        workloads=dstore.workload_rows([context], batch),
        parameters=parameters,
    )
    ledger = dstore.read(
        db,
        "edit_ledger",
        {
            "old": old.model,
            "new": new.model,
            "prefill": dstore.prefill_workload(context),
            "decode": dstore.decode_workload(context, batch),
            "dtype": dtype,
            "deployment": chosen["deployment"],
        },
    )
    profile = chosen.get("weight_profile") or "native"
    report = EditReport(derived, db, context, batch, dtype, chosen["deployment"], ledger, profile)
    record_edit(report, diff_analyses(old, new, phase="prefill"))
    return report


# ---------------------------------------------------------------------------- the edit's record

# An edit is recorded in the design store as rows (like an audit card): the design store's
# workloads and deployments are the last design command's, so a ledger read from the views
# later would no longer be this edit's.  Keyed by the derived model's name: the same edit run
# again replaces its record.  The site reads them with saved queries (site_edit_ledger,
# site_edit_graph).
EDIT_SCHEMAS = {
    "design_edits": pa.schema(
        [
            ("edit", pa.string()),  # the derived model
            ("created_at", pa.timestamp("us")),
            ("base", pa.string()),
            ("spec_file", pa.string()),
            ("swaps", pa.list_(pa.string())),  # "template.slot: old -> new"
            ("dims", pa.list_(pa.string())),  # "dim: where its binding came from"
            ("dims_dropped", pa.list_(pa.string())),
            ("context", pa.int64()),
            ("batch", pa.int64()),
            ("kv_dtype", pa.string()),
            ("weight_profile", pa.string()),
            ("deployment", pa.string()),
        ]
    ),
    "design_edit_ledger": pa.schema(
        [
            ("edit", pa.string()),
            ("position", pa.int64()),
            ("scope", pa.string()),
            ("template", pa.string()),
            ("layers_old", pa.int64()),
            ("layers_new", pa.int64()),
            ("quantity", pa.string()),
            ("unit", pa.string()),
            ("old", pa.float64()),
            ("new", pa.float64()),
            ("delta", pa.float64()),
            ("ratio", pa.float64()),
        ]
    ),
    "design_edit_diff": pa.schema(
        [
            ("edit", pa.string()),
            ("position", pa.int64()),
            ("phase", pa.string()),
            ("path", pa.string()),  # a node's uid, or $.<key> for dims, schedules and templates
            ("status", pa.string()),  # only_a (removed) | only_b (added) | changed
            ("attribute", pa.string()),
            ("a_value", pa.string()),
            ("b_value", pa.string()),
        ]
    ),
}
EDIT_KEYS = {
    "design_edits": ("edit",),
    "design_edit_ledger": ("edit", "position"),
    "design_edit_diff": ("edit", "position"),
}


def edit_tables(report: EditReport, diff) -> dict[str, pa.Table]:
    """The rows that record ``report`` (and its graph diff, :class:`archsql.design.diff.GraphDiff`)."""
    from datetime import UTC, datetime

    d = report.derived
    edit = {
        "edit": d.name,
        "created_at": datetime.now(UTC).replace(tzinfo=None),
        "base": d.base,
        "spec_file": str(d.path),
        "swaps": [f"{where}: {old} -> {new}" for where, (old, new) in d.swapped.items()],
        "dims": [f"{dim}: {source}" for dim, source in d.provenance.items()],
        "dims_dropped": list(d.dims_dropped),
        "context": report.context,
        "batch": report.batch,
        "kv_dtype": report.dtype,
        "weight_profile": report.weight_profile,
        "deployment": report.deployment,
    }
    ledger = [{"edit": d.name, "position": i, **r} for i, r in enumerate(report.ledger.to_pylist())]
    changes = [
        {"edit": d.name, "position": i, **{k: r[k] for k in EDIT_SCHEMAS["design_edit_diff"].names[2:]}}
        for i, r in enumerate(diff.table.to_pylist())
    ]
    rows = {"design_edits": [edit], "design_edit_ledger": ledger, "design_edit_diff": changes}
    return {name: pa.Table.from_pylist(rows[name], schema=schema) for name, schema in EDIT_SCHEMAS.items()}


def record_edit(report: EditReport, diff) -> None:
    """Write the edit's rows (:func:`edit_tables`) into its design store, replacing an earlier
    edit of the same derived model."""
    tables = edit_tables(report, diff)
    dstore.write_record(
        report.db, {name: (rows, EDIT_KEYS[name]) for name, rows in tables.items()}, {"edit": report.derived.name}
    )


__all__ = [
    "DEFAULT_DEPLOYMENT",
    "EDIT_SCHEMAS",
    "DerivedModel",
    "EditReport",
    "Swap",
    "derive",
    "edit_model",
    "edit_tables",
    "record_edit",
]
