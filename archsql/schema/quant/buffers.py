"""A model spec's ``buffers:``: non-parameter tensors saved in the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archsql.errors import Issue
from archsql.schema.checks import Collector, type_name
from archsql.schema.quant.context import dtype_field, located

BUFFER_KEYS = ("node", "shape", "dtype", "doc")


@dataclass(frozen=True)
class Buffer:
    """A non-parameter tensor saved in the checkpoint (a persistent buffer)."""

    name: str  # checkpoint name template ({layer} allowed when the node is in a stack)
    node: str  # uid (or model graph node name) whose copies it follows
    shape: tuple[Any, ...]  # dim expressions
    dtype: str
    where: Issue
    doc: str = ""


def parse_buffers(raw: Any, col: Collector, path: str = "$.buffers") -> list[Buffer]:
    out: list[Buffer] = []
    if raw is None:
        return out
    if not isinstance(raw, dict):
        col.add(raw, None, path, "buffers map a checkpoint tensor name to {node, shape, dtype}", got=type_name(raw))
        return out
    for name, entry in raw.items():
        p = f"{path}[{name!r}]"
        if not col.keys(entry, p, BUFFER_KEYS, ("node", "shape", "dtype"), at=(raw, name)):
            continue
        dtype = dtype_field(col, entry, "dtype", f"{p}.dtype")
        shape = entry.get("shape")
        if not isinstance(shape, list):
            col.add(
                entry,
                "shape",
                f"{p}.shape",
                "shape must be a list of dim expressions",
                got=type_name(shape),
                value=True,
            )
            continue
        node = entry.get("node")
        if not isinstance(node, str):
            col.add(
                entry,
                "node",
                f"{p}.node",
                "node names the graph node (or uid) the buffer belongs to",
                got=type_name(node),
                value=True,
            )
            continue
        if dtype is not None:
            out.append(
                Buffer(
                    str(name),
                    node,
                    tuple(shape),
                    dtype,
                    located(col, raw, name, p),
                    " ".join(str(entry.get("doc", "")).split()),
                )
            )
    return out
