"""Read a Hugging Face ``config.json``: a JSON object, or a located error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from archsql.errors import ConfigError, Issue, did_you_mean
from archsql.ingest import jsonfile


def read_config(path: str | Path) -> dict[str, Any]:
    """The parsed config.  Missing files, invalid JSON and non-object roots raise
    :class:`ConfigError` naming the file (and line:column for syntax errors)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        near = did_you_mean(path.name, [p.name for p in path.parent.glob("*.json")]) if path.parent.is_dir() else None
        raise ConfigError(
            issues=[
                Issue("config file not found", file=str(path), hint=near or f"put the config.json under {path.parent}")
            ]
        ) from None
    except OSError as exc:
        raise ConfigError(issues=[Issue(f"cannot read config: {exc.strerror}", file=str(path))]) from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        column = exc.start - (exc.object.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            issues=[
                Issue(
                    f"config is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}",
                    file=str(path),
                    line=line,
                    column=column,
                    hint="JSON files are UTF-8; re-download the config or save it as UTF-8",
                )
            ]
        ) from None
    try:
        data = jsonfile.loads(text, duplicates="differing")
    except jsonfile.JsonDuplicateKeyError as exc:
        raise ConfigError(
            issues=[
                Issue(
                    f"config key {exc.key!r} is given twice with different values",
                    file=str(path),
                    hint="JSON readers keep one of them silently; keep the one that is meant",
                )
            ]
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            issues=[Issue(f"config is not valid JSON: {exc.msg}", file=str(path), line=exc.lineno, column=exc.colno)]
        ) from None
    except jsonfile.JsonLimitError as exc:
        raise ConfigError(
            issues=[Issue(f"config: {exc}", file=str(path), hint="a config.json nests a few levels; is it corrupt?")]
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            issues=[
                Issue("config.json must hold a JSON object", file=str(path), expected="object", got=type(data).__name__)
            ]
        )
    return data
