"""The evaluator: model spec → SpecIR → Program → Analysis tables, evaluated once.

The passes, in order (each a module named by its verb; all issues of a model are collected
and raised together as one located error):

1. ``bind``               the model's dims from its config (``bind.py``)
2. ``expand``             the spec per phase into a Program (``expand.py``; the SpecIR types
                          in ``ir.py``, layer schedules in ``schedule.py``, streams in ``streams.py``)
3. ``infer_shapes``       one walk per Program: shapes, FLOPs, weights, caches (``walk.py``)
4. ``propagate_layouts``  shardings and the inferred collectives (``layouts.py``,
                          ``context_parallel.py``)
5. ``build_tables``       the Analysis tables (``analysis.py``; liveness in ``liveness.py``,
                          formulas as term rows in ``terms.py``)
6. ``bind_storage``       how each weight is stored, per precision profile (``storage.py``)

Op-specific behaviour (shape rule, FLOPs, layout and cache rules) lives on the primitive
classes in ``primitives/``; the passes call their hooks and never name an op.
"""

from __future__ import annotations

from pathlib import Path

from archsql.errors import EvaluationError, ShapeError, SpecError
from archsql.evaluator.analysis import Analysis, build_tables
from archsql.evaluator.bind import bind_dims, config_path, load_config, unread_config_warnings
from archsql.evaluator.expand import expand
from archsql.evaluator.streams import stack_stream_names
from archsql.evaluator.walk import walk
from archsql.ingest.hf_config import ConfigReads
from archsql.schema.checks import add_issue
from archsql.schema.crossref import check_graph, check_nodes
from archsql.schema.spec import Where, parse_model
from archsql.schema.tables import PHASES


def evaluate(model: str | Path, library=None) -> Analysis:
    """Evaluate one model (catalog name or path to a model .yaml) into Analysis tables."""
    from archsql.errors import unknown_name
    from archsql.specs import default_library

    library = library or default_library()
    # Every check of the model file runs before raising, so all its issues come together.
    spec, col = parse_model(library.model_path(model))
    if spec is None:
        raise SpecError(issues=col.issues)
    dims: dict[str, int] = {}
    config: dict = ConfigReads({})
    if "config" in spec.where and not any(i.path == "$.config" for i in col.issues):
        before = len(col.issues)
        config = ConfigReads(load_config(spec, library.configs_dir, col))
        if len(col.issues) == before:
            dims = bind_dims(col, spec, config, library)
    check_nodes(col, spec.graph, library)
    for slot, fill in [*spec.components.items(), *((s, f) for t in spec.templates.values() for s, f in t.items())]:
        if fill.component not in library.component_files:
            message, hint = unknown_name("component", fill.component, library.component_files)
            add_issue(col, fill.where, f"{slot}: {message}", hint=hint)
    check_graph(
        col,
        spec.graph,
        spec.inputs,
        spec.outputs,
        spec.where.get("outputs"),
        spec.where.get("graph", Where(spec.file, None, None, "$.graph")),
        stack_stream_names(spec),
    )
    if col.issues:
        raise SpecError(issues=col.issues)
    walks = {}
    programs = {}
    for phase in PHASES:
        programs[phase] = expand(spec, library, dims, phase, col, config)
        if col.issues:
            raise SpecError(issues=_dedupe(col.issues))
    _check_unused_dims(col, spec, programs, library)
    if col.issues:
        raise SpecError(issues=col.issues)
    for phase, program in programs.items():
        walks[phase] = walk(program, library, dims, col)
        if col.issues:
            raise ShapeError(issues=_dedupe(col.issues))
    try:
        tables = build_tables(spec.name, spec, str(config_path(spec, library.configs_dir)), dims, walks, library)
    except (ValueError, TypeError, ArithmeticError) as exc:  # pragma: no cover - engine bug guard
        raise EvaluationError(f"{spec.file}: cannot evaluate model '{spec.name}': {exc}") from exc
    analysis = Analysis(spec.name, dims, walks, tables)
    # bind_storage: how each weight is stored (quant_context, config quantization); its rule
    # problems are the packing guard's (archsql.validate), so only the table is kept here
    import pyarrow as pa

    from archsql.evaluator.storage import NATIVE, bind_storage
    from archsql.schema.quant import profile_names

    # the checkpoint's own storage and every precision profile (a deployment's weight_profile
    # picks one; "what if it were deployed in FP8" is the same spec bound another way)
    tables["storage_tensors"] = pa.concat_tables(
        bind_storage(analysis, library, profile=profile, config=config).table for profile in (NATIVE, *profile_names())
    )
    analysis.warnings = unread_config_warnings(spec, config, config_path(spec, library.configs_dir))
    return analysis


def _check_unused_dims(col, spec, programs, library) -> None:
    """A bound dim no node uses is a stale or misplaced binding (context dims are metadata);
    a used dim the model does not bind is an error too (dims are never defaulted)."""
    from archsql.schema.expr import RUNTIME_SYMBOLS, expr_names

    used: set[str] = set()
    sites: dict[str, list[str]] = {}
    for program in programs.values():
        for node in program.nodes:
            for key, raw in node.dims.items():
                for text in raw if isinstance(raw, list) else [raw]:
                    if isinstance(text, str):
                        names = expr_names(text)
                        used |= names
                        w = node.dims_where.get(key, node.where)
                        for name in names:
                            sites.setdefault(name, []).append(f"{Path(w.file).name}:{w.line} {w.path}")
        for st in program.stacks.values():
            used |= {str(s) for s in st.repeat_expr.free_symbols}
            for entry in st.spec.schedule if isinstance(st.spec.schedule, list) else ():
                layers = entry.get("layers") if isinstance(entry, dict) else None
                if isinstance(layers, str):
                    used |= {n for part in layers.split(":") if part.strip() for n in expr_names(part)}
    dims_where = spec.where.get("dims", Where(spec.file, None, None, "$.dims"))
    for dim in sorted(used - set(spec.dims) - set(RUNTIME_SYMBOLS)):
        if dim in library.dims:
            at = ", ".join(sorted(set(sites.get(dim, [])))[:3])
            add_issue(
                col,
                Where(dims_where.file, dims_where.line, dims_where.column, "$.dims"),
                f"dim '{dim}' is used but not bound by model '{spec.name}'" + (f" (used at {at})" if at else ""),
                hint=f"bind it under dims:, e.g. '{dim}: config.<key>' — dims are never defaulted",
                rule="dim_unbound",
            )
    for dim in spec.dims:
        if dim in library.dims and dim not in used and library.dims[dim]["kind"] != "context":
            add_issue(
                col,
                spec.dims_where[dim],
                f"dim '{dim}' is bound but no node of model '{spec.name}' uses it",
                hint=f"remove the binding (in a derived model: '{dim}: null'), or use it in a node's dims",
                rule="dim_unused",
            )


def _dedupe(issues):
    return list(dict.fromkeys(issues))


__all__ = ["Analysis", "evaluate"]
