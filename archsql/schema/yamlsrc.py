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
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # refuse deep nesting while composing: PyYAML's scanner slows down with every open
        # flow level and its composer recurses per level (RecursionError at a few hundred)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                line, col = _pos(self.peek_event())
                raise SpecError(issues=[_too_deep(self.name, line, col)])
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# Resource bounds on one YAML file.  Aliases share nodes, so a few hundred bytes of nested
# aliases ("billion laughs") expand to billions of values for any walk over the data; the
# expanded size is counted on the composed node graph, before anything is built.  The
# catalog's largest spec (Kimi-K3.yaml) expands to about 500 values and nests a few levels deep.
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 100
MAX_YAML_BYTES = 1 << 20  # the largest spec in the catalog is 9 KB


def _too_deep(name: str, line: int | None, col: int | None) -> Issue:
    return Issue(
        f"YAML nests more than {MAX_YAML_DEPTH} levels deep",
        file=name,
        line=line,
        column=col,
        hint="a spec nests a few levels; is this file generated or corrupt?",
    )


def _too_large(size: int, name: str) -> SpecError:
    return SpecError(
        issues=[
            Issue(
                f"spec file of {size:,} bytes is larger than the bound of {MAX_YAML_BYTES:,} bytes",
                file=name,
                expected=f"at most {MAX_YAML_BYTES:,} bytes (the catalog's largest spec is 9 KB)",
                hint="a spec is a short hand-written file; is this the right file?",
            )
        ]
    )


def _pos(node: yaml.Node | yaml.Event) -> tuple[int, int]:
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
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark, "found a list or mapping as a key", key_node.start_mark
            ) from None
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
    """Parse YAML text; syntax errors become a located SpecError, and so do the resource
    bounds (MAX_YAML_BYTES, MAX_YAML_VALUES once aliases are expanded, MAX_YAML_DEPTH)."""
    if len(text) > MAX_YAML_BYTES:
        raise _too_large(len(text.encode("utf-8", "surrogatepass")), name)
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # a control character in the text (the reader checks on creation)
        raise SpecError(issues=[Issue(f"YAML error: {exc}", file=name)]) from None
    loader.name = name
    try:
        node = loader.get_single_node()
        _check_size(node, name)
        data = None if node is None else loader.construct_document(node)
    except SpecError:
        raise
    except RecursionError:
        raise SpecError(
            issues=[
                Issue(
                    "YAML nesting is too deep to read",
                    file=name,
                    expected=f"at most {MAX_YAML_DEPTH} nested lists or mappings",
                    hint="a spec nests a few levels; is this file generated or corrupt?",
                )
            ]
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar PyYAML cannot build: 2024-13-45
        raise SpecError(
            issues=[Issue(f"YAML value cannot be read: {exc}", file=name, hint="quote the value to keep it a string")]
        ) from None
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


def _check_size(root: yaml.Node | None, name: str) -> None:
    """Refuse a document whose aliases expand beyond MAX_YAML_VALUES values or that nests deeper
    than MAX_YAML_DEPTH; computed once per distinct node (aliases share nodes), without recursion."""
    if root is None:
        return
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if id(node) in size:
            continue
        if depth > MAX_YAML_DEPTH:  # aliases nest a deep node under another
            raise SpecError(issues=[_too_deep(name, *_pos(node))])
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = 1
            continue
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        if done:
            size[id(node)] = total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_YAML_VALUES:
                raise SpecError(
                    issues=[
                        Issue(
                            f"YAML document expands to more than {MAX_YAML_VALUES:,} values",
                            file=name,
                            line=_pos(node)[0],
                            column=_pos(node)[1],
                            expected=f"at most {MAX_YAML_VALUES:,} values once aliases (*name) are expanded",
                            got=f"{total:,} values or more",
                            hint=(
                                "nested aliases multiply: a few lines can expand to billions of values"
                                if total > len(size)
                                else None
                            ),
                        )
                    ]
                )
            continue
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


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
        if path.is_file() and path.stat().st_size > MAX_YAML_BYTES:
            raise _too_large(path.stat().st_size, str(path))
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(issues=[Issue(f"cannot read spec file: {exc.strerror}", file=str(path))]) from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            issues=[
                Issue(
                    f"spec file is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}",
                    file=str(path),
                    hint="save the file as UTF-8",
                )
            ]
        ) from None
    return load_yaml_text(text, str(path))
