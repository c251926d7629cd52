"""The bind pass: a model's config snapshot read (a missing file located at the spec's
``config:`` line) and every ``dims:`` binding evaluated against it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from archsql.errors import ConfigError, unknown_name
from archsql.ingest.hf_config import read_config
from archsql.schema.checks import Collector, add_issue, type_name
from archsql.schema.expr import ExprSyntaxError, FlagValue, eval_binding
from archsql.schema.spec import ModelSpec, Where


def config_path(model: ModelSpec, configs_dir: Path) -> Path:
    path = Path(model.config_file)
    return path if path.is_absolute() else configs_dir / path


def load_config(model: ModelSpec, configs_dir: Path, col: Collector) -> dict[str, Any]:
    """The model's config.json; a missing file is reported at the spec's ``config:`` line."""
    path = config_path(model, configs_dir)
    try:
        return read_config(path)
    except ConfigError as exc:
        issue = exc.issues[0]
        if issue.message == "config file not found":
            where = model.where.get("config", Where(model.file, None, None, "$.config"))
            add_issue(col, where, f"config file not found: {path}", hint=issue.hint)
        else:
            col.issues.extend(exc.issues)
    return {}


def bind_dims(col: Collector, model: ModelSpec, config: Mapping[str, Any], library) -> dict[str, int]:
    """Evaluate every ``dims:`` binding of a model against its config."""
    values: dict[str, int] = {}
    for dim, text in model.dims.items():
        where = model.dims_where[dim]
        if dim not in library.dims:
            message, hint = unknown_name("dim", dim, library.dims)
            add_issue(col, where, message, hint=f"{hint} (new dims are declared in archsql/specs/dims.yaml)")
            continue
        try:
            value = eval_binding(text, config)
        except KeyError as exc:
            key, hint = exc.args
            add_issue(
                col,
                where,
                f"config key '{key}' is missing from {Path(model.config_file).name}",
                hint=(
                    hint + " — or bind the dim to a number"
                    if hint
                    else "use 'config.<key> or <fallback>' or bind the dim to a number"
                ),
            )
            continue
        except ExprSyntaxError as exc:
            add_issue(col, where, str(exc), expected="a number or an expression over config.<key>", got=type_name(text))
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            add_issue(col, where, f"dim '{dim}' must bind to an integer", expected="integer", got=type_name(value))
            continue
        kind = library.dims[dim]["kind"]
        if isinstance(value, FlagValue) and kind != "flag":
            read = f" ({text} is {value!r})" if isinstance(text, str) else ""
            add_issue(
                col,
                where,
                f"dim '{dim}' binds to a boolean{read}: a bool is not an integer {kind} dim",
                expected="an integer",
                got=repr(value),
                hint="a true/false value binds only a flag dim; check the config key the dim reads",
            )
            continue
        value = int(value)
        if kind == "flag" and value not in (0, 1):
            add_issue(col, where, f"flag dim '{dim}' must be 0 or 1", expected="0 or 1", got=str(value))
        elif kind in ("window", "index") and value < 0:
            add_issue(col, where, f"{kind} dim '{dim}' must be 0 or positive", expected=">= 0", got=str(value))
        elif kind not in ("flag", "window", "index") and value <= 0:
            add_issue(col, where, f"dim '{dim}' must be positive", expected="> 0", got=str(value))
        values[dim] = value
    return values
