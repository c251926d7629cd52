"""Small helpers for closed-schema checking with located, collected issues."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from archsql.errors import MAX_SHOWN_ISSUES, Issue, did_you_mean
from archsql.schema.yamlsrc import LocDict, LocList


def add_issue(col: Collector, where: Any, message: str, **kw) -> None:
    """Add an issue located at ``where`` (a :class:`~archsql.schema.spec.Where`: file, line,
    column, path) to ``col``; ``kw``: expected, got, hint."""
    col.issues.append(Issue(message, file=where.file, line=where.line, column=where.column, path=where.path, **kw))


class Collector:
    """Collects issues of one file; ``raise_if_any`` raises them all at once."""

    def __init__(self, file: str):
        self.file = file
        self.issues: list[Issue] = []

    def add(
        self,
        obj: Any,
        key: str | int | None,
        path: str,
        message: str,
        *,
        expected=None,
        got=None,
        hint=None,
        value=False,
    ):
        line = col = None
        if isinstance(obj, LocDict) and isinstance(key, str):
            line, col = obj.value_pos(key) if value else obj.key_pos(key)
        elif isinstance(obj, LocList) and isinstance(key, int):
            line, col = obj.item_pos(key)
        elif isinstance(obj, LocDict | LocList):
            line, col = obj.line, obj.column
        file = getattr(obj, "file", None) or self.file
        self.issues.append(
            Issue(message, file=file, line=line, column=col, path=path, expected=expected, got=got, hint=hint)
        )

    def keys(
        self,
        obj: Any,
        path: str,
        allowed: Iterable[str],
        required: Iterable[str] = (),
        what: str = "key",
        at: tuple[Any, str | int] | None = None,
    ) -> bool:
        """Closed mapping check. Returns False when ``obj`` is not a mapping.

        ``at`` = (parent, key) locates a scalar ``obj``, which carries no position itself."""
        if not isinstance(obj, dict):
            if at is not None and not isinstance(obj, LocDict | LocList):
                self.add(at[0], at[1], path, "expected a mapping", expected="mapping", got=type_name(obj), value=True)
            else:
                self.add(obj, None, path, "expected a mapping", expected="mapping", got=type_name(obj))
            return False
        allowed = list(allowed)
        for key in obj:
            if key not in allowed:
                # the closest-name search is for the issues a reader sees (MAX_SHOWN_ISSUES): a
                # file of a million unknown keys costs one pass, not a million searches
                near = did_you_mean(key, allowed) if len(self.issues) < MAX_SHOWN_ISSUES else None
                hint = near or f"allowed {what}s: {', '.join(allowed)}"
                self.add(obj, key, f"{path}.{key}", f"unknown {what} '{key}'", hint=hint)
        for key in required:
            if key not in obj:
                self.add(obj, None, path, f"missing required {what} '{key}'", hint=f"add '{key}:' to {path}")
        return True

    def type(self, obj: Any, key: str, path: str, types: tuple[type, ...], expected: str) -> bool:
        value = obj.get(key)
        ok = False if isinstance(value, bool) and bool not in types else isinstance(value, types)
        if not ok:
            self.add(
                obj,
                key,
                f"{path}.{key}",
                f"wrong type for '{key}'",
                expected=expected,
                got=type_name(value),
                value=True,
            )
        return ok


def type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    return f"{type(value).__name__} {value!r}"
