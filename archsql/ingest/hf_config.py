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


class ConfigReads(dict):
    """A parsed config.json that records which keys are read: every lookup (``c[k]``,
    ``c.get(k)``, ``k in c``) adds the key's dotted path (``text_config.sliding_window``) to
    :attr:`reads`; an object value read through it records its own keys the same way.  A
    reader that walks the whole object (iteration, ``items()``, ``values()``) reads every key
    of it; listing the names (``keys()``, for a "did you mean") reads none.

    What a spec does not read is then known by subtraction (:func:`unread_keys`), so a key that
    changes the architecture and that no binding consumes (``sliding_window`` with a spec that
    caps no cache) is reported instead of silently ignored."""

    def __init__(self, data: dict[str, Any], prefix: str = "", reads: set[str] | None = None):
        super().__init__(data)
        self._prefix = prefix
        self.reads: set[str] = reads if reads is not None else set()

    def _mark(self, key: Any) -> None:
        self.reads.add(f"{self._prefix}{key}")

    def _wrapped(self, key: Any, value: Any) -> Any:
        if isinstance(value, dict) and not isinstance(value, ConfigReads):
            value = ConfigReads(value, f"{self._prefix}{key}.", self.reads)
            dict.__setitem__(self, key, value)
        return value

    def __getitem__(self, key: Any) -> Any:
        self._mark(key)
        return self._wrapped(key, dict.__getitem__(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        self._mark(key)
        return self._wrapped(key, dict.__getitem__(self, key)) if dict.__contains__(self, key) else default

    def __contains__(self, key: object) -> bool:
        self._mark(key)
        return dict.__contains__(self, key)

    def _all(self) -> None:
        for key in dict.keys(self):
            self._mark(key)

    def __iter__(self):
        self._all()
        return dict.__iter__(self)

    def items(self):
        self._all()
        return dict.items(self)

    def values(self):
        self._all()
        return dict.values(self)


def unread_keys(config: ConfigReads, also_read: set[str] = frozenset(), ignored: set[str] = frozenset()) -> list[str]:
    """The keys of ``config`` nobody read (:class:`ConfigReads`), as dotted paths: a top-level
    key not read at all, and the keys of an object that was read but not through and through
    (``text_config.sliding_window``).  ``also_read``: paths a reader named without looking them
    up (a binding's fallback not taken); ``ignored``: key names or dotted paths that do not
    describe the architecture (``torch_dtype``).  A key whose value is null or empty states
    nothing and is not reported."""
    read = config.reads | set(also_read)
    out: list[str] = []

    def visit(obj: dict, prefix: str) -> None:
        for key, value in dict.items(obj):
            path = f"{prefix}{key}"
            if key in ignored or path in ignored or value is None or value == [] or value == {}:
                continue  # null or empty: the config states nothing
            if path not in read:
                out.append(path)
            elif isinstance(value, ConfigReads) and any(r.startswith(path + ".") for r in read):
                visit(value, path + ".")

    visit(config, "")
    return out
