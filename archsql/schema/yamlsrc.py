"""YAML loading that remembers where every value came from.

``load_yaml(path)`` returns plain Python containers (``LocDict``/``LocList``) that carry
the line/column of each key and item, so any later check can report
``file:line:col $.yaml.path``.  YAML syntax errors become a located :class:`SpecError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from archsql.errors import Issue, SpecError


class LocDict(dict):
    """A dict that knows the position of itself and of each of its keys."""

    file: str | None = None
    line: int | None = None
    column: int | None = None

    def key_pos(self, key: str) -> tuple[int | None, int | None]:
        return getattr(self, "_key_pos", {}).get(key, (self.line, self.column))

    def value_pos(self, key: str) -> tuple[int | None, int | None]:
        return getattr(self, "_val_pos", {}).get(key, self.key_pos(key))


class LocList(list):
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def item_pos(self, i: int) -> tuple[int | None, int | None]:
        pos = getattr(self, "_item_pos", [])
        return pos[i] if i < len(pos) else (self.line, self.column)


class _Loader(yaml.SafeLoader):
    pass


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LocDict:
    out = LocDict()
    out.file = loader.name
    out.line, out.column = _pos(node)
    out._key_pos = {}
    out._val_pos = {}
    out._dup = []
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            out._dup.append((key, *_pos(key_node)))
        out[key] = loader.construct_object(value_node, deep=True)
        out._key_pos[key] = _pos(key_node)
        out._val_pos[key] = _pos(value_node)
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LocList:
    out = LocList(loader.construct_object(child, deep=True) for child in node.value)
    out.file = loader.name
    out.line, out.column = _pos(node)
    out._item_pos = [_pos(child) for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml_text(text: str, name: str) -> Any:
    """Parse YAML text; syntax errors become a located SpecError."""
    loader = _Loader(text)
    loader.name = name
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = f"YAML syntax error: {exc.problem or exc}"
        ctx = exc.context_mark
        if exc.context and ctx is not None and exc.problem_mark is not None and ctx.line != exc.problem_mark.line:
            # e.g. an unclosed '{' or quote: the parser notices on a later line; name both
            message += f" ({exc.context} started at line {ctx.line + 1}, column {ctx.column + 1})"
        raise SpecError(
            issues=[
                Issue(
                    message,
                    file=name,
                    line=line,
                    column=col,
                    hint="check indentation and quoting near this position "
                    "(expressions containing ':' or '#' must be quoted)",
                )
            ]
        ) from None
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        raise SpecError(issues=[Issue(f"YAML error: {exc}", file=name)]) from None
    finally:
        loader.dispose()
    duplicates = []
    _collect_duplicates(data, duplicates)
    if duplicates:
        raise SpecError(
            issues=[
                Issue(
                    f"duplicate key '{key}'",
                    file=name,
                    line=line,
                    column=col,
                    path=path,
                    hint="each key may appear once in a mapping; remove or rename one",
                )
                for key, line, col, path in duplicates
            ]
        )
    return data


def _collect_duplicates(obj: Any, out: list, path: str = "$") -> None:
    if isinstance(obj, LocDict):
        out.extend((key, line, col, f"{path}.{key}") for key, line, col in getattr(obj, "_dup", []))
        for k, v in obj.items():
            _collect_duplicates(v, out, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _collect_duplicates(v, out, f"{path}[{i}]")


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(issues=[Issue(f"cannot read spec file: {exc.strerror}", file=str(path))]) from None
    return load_yaml_text(text, str(path))
