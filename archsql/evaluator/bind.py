"""The bind pass: a model's config snapshot read (a missing file located at the spec's
``config:`` line) and every ``dims:`` binding evaluated against it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from archsql.errors import ConfigError, Issue, unknown_name
from archsql.ingest.hf_config import ConfigReads, read_config, unread_keys
from archsql.schema.checks import Collector, add_issue, type_name
from archsql.schema.expr import ExprSyntaxError, FlagValue, eval_binding
from archsql.schema.spec import ModelSpec, Where


def config_path(model: ModelSpec, configs_dir: Path) -> Path:
    """The model's config.json: ``config:`` as written when absolute; else relative to the
    spec file (a user's ``my-model.yaml`` beside its ``config.json``), and, when no such file
    is there, the name of a snapshot in the catalog's configs folder (``configs_dir``)."""
    path = Path(model.config_file)
    if path.is_absolute():
        return path
    beside = Path(model.file).parent / path
    return beside if beside.is_file() else configs_dir / path


def load_config(model: ModelSpec, configs_dir: Path, col: Collector) -> dict[str, Any]:
    """The model's config.json; a missing file is reported at the spec's ``config:`` line."""
    path = config_path(model, configs_dir)
    try:
        return read_config(path)
    except ConfigError as exc:
        issue = exc.issues[0]
        if issue.message == "config file not found":
            where = model.where.get("config", Where(model.file, None, None, "$.config"))
            written = Path(model.config_file)
            looked = (
                str(path)
                if written.is_absolute()
                else f"neither {Path(model.file).parent / written} (beside the spec) nor {path} (a catalog config)"
            )
            add_issue(
                col,
                where,
                f"config file not found: {looked}",
                hint=issue.hint
                if written.is_absolute()
                else f"{issue.hint + '; or ' if issue.hint else ''}put the config.json next to the spec and "
                f"write config: as its path relative to {Path(model.file).name}",
            )
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


# config keys that describe no part of the architecture archsql evaluates (training settings,
# token ids, library bookkeeping): never reported as unread (archsql/specs/config_keys.yaml)
CONFIG_KEYS_FILE = Path(__file__).resolve().parent.parent / "specs" / "config_keys.yaml"


@cache
def ignored_config_keys() -> frozenset[str]:
    """Key names (or dotted paths) of archsql/specs/config_keys.yaml ``not_architecture``."""
    import yaml

    data = yaml.safe_load(CONFIG_KEYS_FILE.read_text(encoding="utf-8")) or {}
    return frozenset(data.get("not_architecture") or {})


_CONFIG_REF = re.compile(r"\bconfig((?:\.[A-Za-z_]\w*)+)")


def config_references(model: ModelSpec) -> set[str]:
    """The dotted config paths the spec's expressions name (dims, template dims, stack
    repeats, schedules and first layers), evaluated or not: a fallback a binding did not need
    (``config.head_dim or …``) is still a key the spec reads.  Each prefix counts as read."""
    found: set[str] = set()

    def visit(value: Any) -> None:
        if isinstance(value, str):
            for match in _CONFIG_REF.finditer(value):
                parts = match.group(1)[1:].split(".")
                found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        elif isinstance(value, Mapping):
            for v in value.values():
                visit(v)
        elif isinstance(value, list | tuple):
            for v in value:
                visit(v)

    visit(model.dims)
    visit(model.template_dims)
    for stack in model.stacks.values():
        visit([stack.repeat, stack.schedule, stack.first_layer])
    return found


def unread_config_warnings(model: ModelSpec, config: Any, path: Path) -> list[Issue]:
    """A warning per config key the model's evaluation never read (bindings, schedules, the
    quantization reader: :class:`~archsql.ingest.hf_config.ConfigReads`) and that
    archsql/specs/config_keys.yaml does not list as outside the architecture: a key the spec
    ignores may change the numbers (``sliding_window`` unread: every cache uncapped)."""
    if not isinstance(config, ConfigReads):
        return []
    out = []
    # config_unused keys, and the config keys of the parts the spec declares omitted
    said = [*model.config_unused, *(k for part in model.omitted.values() for k in part.config)]
    acknowledged = {".".join(k.split(".")[: i + 1]) for k in said for i in range(k.count(".") + 1)}
    for key in unread_keys(config, config_references(model) | acknowledged, ignored_config_keys()):
        out.append(
            Issue(
                f"config key '{key}' is not read by the spec {Path(model.file).name}",
                file=str(path),
                path=f"$.{key}",
                hint="if it changes the architecture (a window, a per-layer list, a head size), bind it in the "
                "spec's dims or schedule; if the spec is right without it, say why under the spec's "
                f"`config_unused:` ({key}: <reason>)",
            )
        )
    return out
