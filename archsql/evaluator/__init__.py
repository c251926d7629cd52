"""The evaluator: model spec → SpecIR → Program → Analysis tables, evaluated once.

Passes, in order (each a module named by its verb): ``bind`` the model's dims from its
config (``archsql.schema.validate.bind_dims``), ``expand`` the spec per phase into a
Program, ``walk`` it to infer shapes and per-node quantities, then build the tables.
All issues of a model are collected and raised together as one located error.
"""

from __future__ import annotations

from pathlib import Path

from archsql.errors import EvaluationError, ShapeError, SpecError
from archsql.evaluator.analysis import Analysis, build_tables
from archsql.evaluator.expand import expand
from archsql.evaluator.walk import walk
from archsql.schema.checks import Collector
from archsql.schema.tables import PHASES
from archsql.schema.validate import _check_arity, _add, bind_dims, check_node_params, load_config


def evaluate(model: str | Path, library=None) -> Analysis:
    """Evaluate one model (catalog name or path to a model .yaml) into Analysis tables."""
    from archsql.evaluator.primitives.base import registry
    from archsql.specs import default_library
    from archsql.errors import unknown_name

    library = library or default_library()
    spec = library.model(model)
    col = Collector(spec.file)
    config = load_config(spec, library.configs_dir, col)
    if col.issues:
        raise SpecError(issues=col.issues)
    dims = bind_dims(col, spec, config, library)
    prims = registry()
    for node in spec.graph.values():
        if node.op is not None:
            if node.op not in prims:
                message, hint = unknown_name("op", node.op, prims)
                _add(col, node.where, message, hint=hint)
            else:
                check_node_params(col, node, prims[node.op], library.dims)
                _check_arity(col, node, prims[node.op])
    for slot, fill in [*spec.components.items(), *((s, f) for t in spec.templates.values() for s, f in t.items())]:
        if fill.component not in library.component_files:
            message, hint = unknown_name("component", fill.component, library.component_files)
            _add(col, fill.where, f"{slot}: {message}", hint=hint)
    if col.issues:
        raise SpecError(issues=col.issues)
    walks = {}
    for phase in PHASES:
        program = expand(spec, library, dims, phase, col)
        if col.issues:
            raise SpecError(issues=_dedupe(col.issues))
        walks[phase] = walk(program, library, dims, col)
        if col.issues:
            raise ShapeError(issues=_dedupe(col.issues))
    config_path = Path(spec.config_file)
    if not config_path.is_absolute():
        config_path = library.configs_dir / config_path
    try:
        tables = build_tables(spec.name, spec, str(config_path), dims, walks, library)
    except (ValueError, TypeError, ArithmeticError) as exc:  # pragma: no cover - engine bug guard
        raise EvaluationError(f"{spec.file}: cannot evaluate model '{spec.name}': {exc}") from exc
    return Analysis(spec.name, dims, walks, tables)


def _dedupe(issues):
    return list(dict.fromkeys(issues))


__all__ = ["Analysis", "evaluate"]
