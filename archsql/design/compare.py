"""Component comparison: several components for one slot under one fixed contract.

Each component is bound with the internal dims of the model it comes from (``NAME@MODEL``:
the model's own bindings, read from its config, and the per-template overrides of the
template that uses the component) and evaluated under one contract: the same ``d_model``,
batch, contexts, GPU and dtype.  The vehicle is a **probe model** — a one-layer model whose
block is the component itself, written as ordinary model YAML and evaluated by the one
engine (:func:`archsql.evaluator.evaluate`).  The probes go into a design store with the
contract's workloads (a prefill and a decode step per context) and a one-GPU ``contract``
deployment; the comparison is the view ``component_comparison`` over the evaluated rows
(``archsql/design/sql/views/component_comparison.sql``): per-layer params and weight bytes,
prefill FLOPs and SOL time, decode step time and cache bytes per request at every context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from archsql.design import store as dstore
from archsql.design.specs import (
    check_dim_names,
    component_dim_names,
    dim_usage,
    effective_fills,
    missing_dims_error,
    require_component,
    role_error,
    safe_stem,
    template_slots,
    unknown_choice,
    write_spec,
)
from archsql.errors import ArchsqlError, DesignError, Issue

PROBE_TEMPLATE = "probe"
CONTRACT_DEPLOYMENT = "contract"
CONTRACT_DIMS = ("d_model",)

_REF = re.compile(
    r"^(?P<component>[A-Za-z0-9_]+)@(?P<origin>[^:\[\]]+?)(?::(?P<template>[A-Za-z0-9_]+))?(?:\[(?P<dims>[^\]]*)\])?$"
)


@dataclass(frozen=True)
class ComponentRef:
    """``NAME@MODEL[:TEMPLATE][[dim=value,…]]``: a component bound as in MODEL (as its
    TEMPLATE uses it), with optional dims set for this probe only."""

    component: str
    origin: str
    template: str | None = None
    dims: tuple[tuple[str, int | str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ComponentRef:
        match = _REF.match(text.strip())
        if match is None:
            raise DesignError(
                f"component reference {text!r} is not NAME@MODEL[:TEMPLATE][[dim=value,…]]",
                [Issue("name the component and the model whose dims it takes", hint="e.g. mla_attention@DeepSeek-V3")],
            )
        from archsql.design.specs import parse_assignments

        raw = match.group("dims")
        dims = parse_assignments([p for p in raw.split(",") if p.strip()], what=f"{text}:") if raw else {}
        return cls(match.group("component"), match.group("origin"), match.group("template"), tuple(dims.items()))

    @property
    def label(self) -> str:
        text = f"{self.component}@{self.origin}"
        if self.template:
            text += f":{self.template}"
        if self.dims:
            text += "[" + ",".join(f"{k}={v}" for k, v in self.dims) + "]"
        return text


@dataclass(frozen=True)
class Contract:
    """What every probe shares: the model width and the workload, GPU and dtype."""

    d_model: int
    contexts: tuple[int, ...]
    batch: int = 1
    gpu: str = "H200 SXM"
    dtype: str = "bf16"

    def workloads(self) -> list[dict]:
        return dstore.workload_rows(self.contexts, self.batch)

    def deployment(self) -> dict:
        # one GPU (every mesh axis its default 1), no cp kind, nodes derived; weights stored in
        # the precision profile named like the dtype
        return {
            "deployment": CONTRACT_DEPLOYMENT,
            "gpu": self.gpu,
            "gpus": 1,
            "cp_kind": "none",
            "nodes": None,
            "weight_dtype": self.dtype,
            "act_dtype": self.dtype,
            "kv_dtype": self.dtype,
            "usable_memory_fraction": 0.9,
            "weight_profile": self.dtype,
        }


@dataclass(frozen=True)
class Probe:
    ref: ComponentRef
    model: str  # the probe model's name in the store
    spec_file: Path
    role: str
    origin_template: str | None


@dataclass(frozen=True)
class Comparison:
    slot: str
    contract: Contract
    probes: tuple[Probe, ...]
    db: Path
    table: pa.Table  # the component_comparison view: one row per component × context

    def to_polars(self):
        import polars as pl

        return pl.from_arrow(self.table)


# ---------------------------------------------------------------------------- probes


def _slot_sites(slot: str, library) -> dict[str, tuple[str, ...]]:
    """Block components declaring ``slot`` → the roles it accepts there."""
    sites: dict[str, tuple[str, ...]] = {}
    slots: set[str] = set()
    for name in library.component_files:
        try:
            comp = library.component(name)
        except ArchsqlError:  # a broken draft elsewhere in the library does not block a comparison
            continue
        slots |= set(comp.slots)
        if slot in comp.slots:
            sites[name] = tuple(comp.slots[slot])
    if not sites:
        raise unknown_choice("slot", slot, slots, f"compare {slot}", " (slots are declared by block components)")
    return sites


def _origin_template(ref: ComponentRef, spec, library) -> tuple[str | None, dict]:
    """The origin template that uses the component (its per-template dim overrides apply)."""
    using = [t for t in spec.templates if any(f.component == ref.component for f in effective_fills(spec, t).values())]
    if ref.template is not None:
        if ref.template not in spec.templates:
            raise unknown_choice("template", ref.template, spec.templates, ref.label)
        chosen = ref.template
    elif not using:
        return None, {}
    else:
        variants = {t: spec.template_dims.get(t, {}) for t in using}
        distinct = {tuple(sorted((k, str(v)) for k, v in d.items())) for d in variants.values()}
        if len(distinct) > 1:
            raise DesignError(
                f"{ref.label}: '{ref.component}' is used by templates {', '.join(using)} of {spec.name} with "
                "different dims",
                [Issue("pick one", hint=" or ".join(f"{ref.component}@{ref.origin}:{t}" for t in using))],
            )
        chosen = using[0]
    used = component_dim_names(library.component(ref.component), library)
    overrides = {k: v for k, v in spec.template_dims.get(chosen, {}).items() if k in used}
    return chosen, overrides


def build_probe(ref: ComponentRef, slot: str, contract: Contract, out_dir: Path, library) -> Probe:
    """Write (and check) the probe model of one component reference."""
    from archsql.evaluator.bind import config_path

    sites = _slot_sites(slot, library)
    comp = require_component(ref.component, library, ref.label)
    spec = library.model(ref.origin)
    if not any(comp.role in roles for roles in sites.values()):
        from archsql.design.specs import SlotSite

        # name the slot as the origin model's block declares it, else the first block with it
        own = [s for t in spec.templates for name, s in template_slots(spec, t, library).items() if name == slot]
        block, roles = next(iter(sites.items()))
        site = own[0] if own else SlotSite(slot, block, roles, library.component(block).where.get("slots"))
        raise role_error(comp, site, ref.label)
    template, overrides = _origin_template(ref, spec, library)
    own = dict(ref.dims)
    check_dim_names(own, library, ref.label)
    bindings: dict[str, object] = {**spec.dims, "d_model": contract.d_model, **own}
    model = ref.label
    path = out_dir / f"{safe_stem(model)}.yaml"
    template_entry: dict = {"dims": overrides} if overrides else {}
    data = {
        "model": model,
        "hf_id": spec.hf_id,
        "config": str(config_path(spec, library.configs_dir).resolve()),
        "doc": (
            f"Probe: one '{slot}' layer of component {comp.name} with the dims of {spec.name}"
            + (f" (template {template})" if template else "")
            + f", under the contract d_model = {contract.d_model}.  Written by archsql compare."
        ),
        "dims": bindings,
        "components": {"block": comp.name},
        "templates": {PROBE_TEMPLATE: template_entry},
        "stacks": {
            PROBE_TEMPLATE: {
                "repeat": 1,
                "path": "model.layers",
                "streams": {"hidden": {"carries": True}},
                "schedule": PROBE_TEMPLATE,
            }
        },
        "inputs": ["input_ids"],
        "graph": {
            "embed_tokens": {
                "op": "embedding",
                "in": "input_ids",
                "path": "model.embed_tokens",
                "dims": {"vocab": "vocab", "d_model": "d_model"},
            },
            PROBE_TEMPLATE: {"stack": PROBE_TEMPLATE, "in": "embed_tokens"},
        },
        "outputs": [PROBE_TEMPLATE],
    }
    if "vocab" not in bindings:
        bindings["vocab"] = 1  # the probe's embedding only shapes the input; it is outside the probe group
    header = f"archsql compare probe: {model} under d_model = {contract.d_model}"
    try:
        return _finish_probe(ref, comp, spec, template, own, bindings, data, path, header, library)
    except BaseException:
        path.unlink(missing_ok=True)  # no half-bound probe is left behind
        raise


def _finish_probe(ref, comp, spec, template, own, bindings, data, path, header, library) -> Probe:
    """Keep the dims the probe's graph reads (an unbound one is an error) and write it."""
    model = data["model"]
    write_spec(path, data, header)
    usage = dim_usage(path, library)
    missing = usage.missing
    if missing:
        raise missing_dims_error(
            model,
            missing,
            usage,
            library,
            library.model_path(ref.origin),
            how=f"bind '{{dim}}' in {spec.name}'s dims:, pick an origin model that binds it, or write "
            f"{ref.component}@{ref.origin}[{{dim}}=<value>]",
        )
    keep = set(usage.used) | {d for d in bindings if library.dims.get(d, {}).get("kind") == "context"}
    unset_own = sorted(d for d in own if d not in usage.used)
    if unset_own:
        raise DesignError(
            f"{ref.label}: no node of {comp.name} reads {', '.join(unset_own)}",
            [Issue(f"'{d}' is set but unused", hint=f"remove {d}=… from the reference") for d in unset_own],
        )
    data["dims"] = {d: v for d, v in bindings.items() if d in keep}
    write_spec(path, data, header)
    return Probe(ref, model, path, comp.role, template)


# ---------------------------------------------------------------------------- comparison

PROBES_SCHEMA = pa.schema(
    [
        ("position", pa.int32()),
        ("model", pa.string()),
        ("slot", pa.string()),
        ("component", pa.string()),
        ("origin", pa.string()),
        ("origin_template", pa.string()),
        ("role", pa.string()),
        ("d_model", pa.int64()),
        ("dtype", pa.string()),
        ("deployment", pa.string()),
        ("spec_file", pa.string()),
    ]
)


def compare_components(
    slot: str,
    refs: list[str | ComponentRef],
    *,
    d_model: int,
    contexts=(2048, 32768, 131072),
    batch: int = 1,
    gpu: str = "H200 SXM",
    dtype: str = "bf16",
    db: str | Path | None = None,
    specs_dir: str | Path | None = None,
    library=None,
    main_db: str | Path | None = None,
) -> Comparison:
    """Evaluate every component reference as a probe under one contract and return the
    ``component_comparison`` view (one row per component × context).  ``gpu`` is a GPU of the
    store ``main_db`` (its GPUs and deployments are copied into the design store ``db``;
    without a store, archsql/gpus/gpus.csv)."""
    from archsql.evaluator import evaluate
    from archsql.specs import default_library

    library = library or default_library()
    if not refs:
        raise DesignError("give at least one component, e.g. --component gqa_attention@Meta-Llama-3.1-8B")
    parsed = [r if isinstance(r, ComponentRef) else ComponentRef.parse(r) for r in refs]
    labels = [r.label for r in parsed]
    twice = sorted({lab for lab in labels if labels.count(lab) > 1})
    if twice:
        raise DesignError(f"component given twice: {', '.join(twice)}")
    if d_model < 1:
        raise DesignError(f"--d-model must be positive, got {d_model}")
    if batch < 1:
        raise DesignError(f"--batch must be positive, got {batch}")
    parameters = dstore.store_parameters(main_db) or dstore.default_parameters()
    contract = Contract(
        d_model, dstore.parse_contexts(contexts), batch, dstore.check_gpu(gpu, parameters), dstore.check_dtype(dtype)
    )
    db = dstore.design_db(db)
    out_dir = Path(specs_dir) if specs_dir else db.with_name(db.stem + ".specs")
    probes = [build_probe(r, slot, contract, out_dir, library) for r in parsed]
    analyses = [evaluate(p.spec_file, library=library) for p in probes]
    dstore.write(
        db,
        analyses,
        workloads=contract.workloads(),
        deployments=[contract.deployment()],
        parameters=dstore.only_deployments(parameters, []),  # the contract's deployment is the only one read
    )
    rows = [
        {
            "position": i,
            "model": p.model,
            "slot": slot,
            "component": p.ref.component,
            "origin": p.ref.origin,
            "origin_template": p.origin_template,
            "role": p.role,
            "d_model": contract.d_model,
            "dtype": contract.dtype,
            "deployment": CONTRACT_DEPLOYMENT,
            "spec_file": str(p.spec_file),
        }
        for i, p in enumerate(probes)
    ]
    dstore.append_rows(db, "design_probes", pa.Table.from_pylist(rows, schema=PROBES_SCHEMA), replace=True)
    dstore.create_view(db, "component_comparison")
    table = dstore.query(db, "select * from component_comparison order by position, context")
    # the rows as compared, kept: the view reads the store's workloads and deployments, which
    # the next design command (edit, audit) replaces with its own (the site reads these rows)
    dstore.write_record(db, {"design_comparison": (table, ("position", "context"))}, {})
    return Comparison(slot, contract, tuple(probes), db, table)


__all__ = ["Comparison", "ComponentRef", "Contract", "Probe", "build_probe", "compare_components"]
