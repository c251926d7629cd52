"""JSON text read with bounded nesting: the one parser behind safetensors headers, shard
indexes and ``config.json``.

Python's ``json`` recurses once per nesting level, so a few kilobytes of ``[[[[…`` raise
``RecursionError`` from inside the parser; a number of thousands of digits raises a bare
``ValueError``.  :func:`loads` turns both into :class:`JsonLimitError` and refuses any
document nested deeper than ``MAX_JSON_DEPTH`` (a safetensors header nests 3 levels, a
config.json about 5), so no later walk over the data recurses without bound either, and any
string that is not valid Unicode (a lone ``\\ud800`` escape).
Callers add the file and what to do.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 64


class JsonLimitError(ValueError):
    """A JSON document beyond a bound (nesting depth, number length); the message says which."""


class JsonDuplicateKeyError(ValueError):
    """An object names one key twice: ``json`` would keep the last value silently."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"key {key!r} appears twice in one object")


def loads(text: str | bytes, *, duplicates: str = "error") -> Any:
    """``json.loads`` with every bound checked; ``json.JSONDecodeError`` for invalid JSON.
    A key given twice in one object is a :class:`JsonDuplicateKeyError` (``duplicates="error"``:
    a safetensors header, whose keys are tensor names) or only when the two values differ
    (``"differing"``: a config or index written twice with the same value is harmless)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out and (duplicates == "error" or out[key] != value):
                raise JsonDuplicateKeyError(key)
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=unique)
    except (json.JSONDecodeError, JsonDuplicateKeyError):
        raise
    except RecursionError:
        raise JsonLimitError(
            f"JSON nested too deeply to read (more than {MAX_JSON_DEPTH} levels of lists or objects)"
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise JsonLimitError(f"JSON value out of range: {exc}") from None
    _check(data)
    return data


def _check(data: Any) -> None:
    """Nesting at most MAX_JSON_DEPTH and every string valid Unicode (a lone surrogate escape
    such as ``"\\ud800"`` parses in Python but cannot be stored or printed; the safetensors
    library rejects it); iterative, so no recursion."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _unicode(value)
            continue
        if isinstance(value, dict):
            for key in value:
                _unicode(key)
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise JsonLimitError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep (lists or objects)")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | str))


def _unicode(text: Any) -> None:
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise JsonLimitError(
                f"JSON string {text[:40]!r} holds a lone surrogate escape (\\u{ord(text[exc.start]):04x}): "
                "not valid Unicode"
            ) from None
