"""Safetensors headers: the 8-byte length and the JSON header of each file, never tensor data.

A header is checked by the rules of the safetensors library itself (huggingface/safetensors,
``safetensors/src/tensor.rs``: ``SafeTensors::read_metadata`` and ``Metadata::validate``):

- the first 8 bytes hold the little-endian header length N, at most 100,000,000, and 8 + N fits in the file;
- the header is UTF-8 JSON, an object of ``name -> {dtype, shape, data_offsets}`` plus an optional
  ``__metadata__`` object of strings;
- ``end - begin`` of a tensor is ``prod(shape) * bits(dtype) / 8``, a whole number of bytes;
- ordered by offsets, every tensor starts where the previous one ends (no gap, no overlap) and the last
  one ends at the end of the file: the data section is covered exactly.

All tensor-level problems of a file are collected and raised together as one :class:`CheckpointError`.
Shard sets (``model.safetensors.index.json``) are read here too: every shard's header, and the index's
``weight_map`` must agree with the headers.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from archsql.dtypes import DTYPE_BITS
from archsql.errors import CheckpointError, Issue, did_you_mean
from archsql.ingest import jsonfile

MAX_HEADER_BYTES = 100_000_000  # MAX_HEADER_SIZE in tensor.rs
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
_FIELDS = ("dtype", "shape", "data_offsets")
MAX_INT64 = 2**63 - 1  # dims and offsets are int64 columns of checkpoint_tensors


@dataclass
class FileTensors:
    """The tensors of one checkpoint file, as columns (offsets relative to the data section)."""

    file: str  # file name relative to the checkpoint
    names: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    begins: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)


def raise_issues(headline: str, issues: list[Issue]) -> None:
    """Raise one :class:`CheckpointError` of all the issues (its message shows the first
    ``MAX_SHOWN_ISSUES`` and counts the rest)."""
    if not issues:
        return
    raise CheckpointError(headline, issues)


def fail(label: str, message: str, **kw: Any) -> CheckpointError:
    """A one-issue error located at ``label`` (a file, or a Hub file)."""
    return CheckpointError(issues=[Issue(message, file=label, **kw)])


def _where(name: str, key: str | None = None) -> str:
    path = f"$[{json.dumps(name)}]"
    return f"{path}.{key}" if key else path


# --------------------------------------------------------------------------- one file


def read_header_bytes(path: str | Path, label: str | None = None) -> tuple[bytes, int]:
    """The raw JSON header of a local file and the size of its data section."""
    label = label or str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise fail(
                    label,
                    "file is shorter than the 8-byte header length of a safetensors file",
                    expected="at least 8 bytes",
                    got=f"{size} bytes",
                    hint="the file is truncated or not a safetensors file",
                )
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise fail(
                    label,
                    "header length is larger than the safetensors limit",
                    expected=f"at most {MAX_HEADER_BYTES:,} bytes",
                    got=f"{n:,} bytes",
                    hint="the first 8 bytes are not a safetensors header length: not a safetensors file?",
                )
            if 8 + n > size:
                raise fail(
                    label,
                    "header length runs past the end of the file",
                    expected=f"8 + header length <= file size {size:,}",
                    got=f"header length {n:,}",
                    hint="the file is truncated (an interrupted download?) or not a safetensors file",
                )
            return f.read(n), size - 8 - n
    except FileNotFoundError:
        raise fail(label, "file not found") from None
    except IsADirectoryError:
        raise fail(label, "is a directory, not a safetensors file") from None
    except OSError as exc:
        raise fail(label, f"cannot read file: {exc.strerror}") from None


def decode_header(raw: bytes, label: str) -> dict[str, Any]:
    """Parse the JSON header: UTF-8, valid JSON, an object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = raw.rfind(b'"', 0, exc.start) + 1
        end = raw.find(b'"', exc.start)
        snippet = raw[start : end if end >= 0 else exc.start + 16].decode("utf-8", "backslashreplace")
        raise fail(
            label,
            f'header is not valid UTF-8 at byte {8 + exc.start} of the file, in the string "{snippet}"',
            hint="tensor names and metadata must be UTF-8 (safetensors rejects the file too)",
        ) from None
    try:
        header = jsonfile.loads(text)
    except jsonfile.JsonDuplicateKeyError as exc:
        raise fail(
            label,
            f"header names {exc.key!r} twice (a tensor entry, or a key of one entry)",
            hint="a JSON reader keeps only the last entry, silently; the header is corrupt",
        ) from None
    except json.JSONDecodeError as exc:
        raise fail(
            label,
            f"header is not valid JSON: {exc.msg} (header line {exc.lineno}, column {exc.colno})",
            hint="the header is corrupt; re-download the file",
        ) from None
    except jsonfile.JsonLimitError as exc:
        raise fail(label, f"header: {exc}", hint="a safetensors header nests 3 levels; the file is corrupt") from None
    if not isinstance(header, dict):
        raise fail(label, "header must be a JSON object", expected="object", got=type(header).__name__)
    return header


def header_tensors(header: Mapping[str, Any], *, file: str, label: str, data_size: int | None) -> FileTensors:
    """Check a decoded header and return its tensors as columns.

    ``data_size`` is the size of the data section (file size - 8 - header length) where it is known (local
    files); then offsets beyond it and uncovered trailing bytes are errors as well."""
    out = FileTensors(file)
    issues: list[Issue] = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                issues.append(Issue("__metadata__ must be an object of strings", file=label, path="$.__metadata__"))
            continue
        row = _entry(name, entry, label, issues)
        if row is not None:  # offsets usable: the tensor takes part in the coverage check
            out.names.append(name)
            out.dtypes.append(row[0])
            out.shapes.append(row[1])
            out.begins.append(row[2])
            out.ends.append(row[3])
    issues += _coverage(out, label, data_size)
    raise_issues(f"{label}: {len(issues)} problem(s) in the safetensors header", issues)
    return out


def _entry(name: str, entry: Any, label: str, issues: list[Issue]) -> tuple[Any, Any, int, int] | None:
    """One tensor entry checked, its issues appended: (dtype, shape, begin, end) when the offsets are
    usable, else None."""
    if not isinstance(entry, dict) or any(k not in entry for k in _FIELDS):
        got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        issues.append(
            Issue(
                f"tensor '{name}' must have dtype, shape and data_offsets",
                file=label,
                path=_where(name),
                expected="{dtype, shape, data_offsets}",
                got=str(got),
            )
        )
        return None
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    bits = DTYPE_BITS.get(dtype) if isinstance(dtype, str) else None
    if bits is None:
        hint = did_you_mean(str(dtype), DTYPE_BITS) or "allowed: " + " ".join(DTYPE_BITS)
        issues.append(
            Issue(f"tensor '{name}': unknown dtype {dtype!r}", file=label, path=_where(name, "dtype"), hint=hint)
        )
    shape_ok = type(shape) is list and all(type(d) is int and 0 <= d <= MAX_INT64 for d in shape)
    if not shape_ok:
        issues.append(
            Issue(
                f"tensor '{name}': shape must be a list of integers from 0 to 2**63 - 1 (the store's int64)",
                file=label,
                path=_where(name, "shape"),
                got=json.dumps(shape),
            )
        )
    if (
        type(offsets) is not list
        or len(offsets) != 2
        or not all(type(o) is int and 0 <= o <= MAX_INT64 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        issues.append(
            Issue(
                f"tensor '{name}': data_offsets must be [begin, end] integers with 0 <= begin <= end < 2**63",
                file=label,
                path=_where(name, "data_offsets"),
                got=json.dumps(offsets),
            )
        )
        return None
    begin, end = offsets
    if bits is None or not shape_ok:
        return dtype, shape, begin, end
    nbits = math.prod(shape) * bits
    if nbits % 8:
        issues.append(
            Issue(
                f"tensor '{name}': {math.prod(shape)} elements of {dtype} are not a whole number of bytes",
                file=label,
                path=_where(name, "shape"),
                got=f"{nbits} bits",
            )
        )
    elif end - begin != nbits // 8:
        issues.append(
            Issue(
                f"tensor '{name}': data_offsets span {end - begin:,} bytes, but shape {shape} of {dtype} is {nbits // 8:,} bytes",
                file=label,
                path=_where(name, "data_offsets"),
                expected=f"{nbits // 8:,} bytes",
                got=f"{end - begin:,} bytes ([{begin}, {end}])",
            )
        )
    return dtype, shape, begin, end


def _coverage(t: FileTensors, label: str, data_size: int | None) -> list[Issue]:
    """Tensors back to back from byte 0 (no overlap, no gap), inside and covering the data section."""
    issues: list[Issue] = []
    begins, ends, names = t.begins, t.ends, t.names
    order = sorted(range(len(names)), key=lambda i: (begins[i], ends[i]))
    pos, prev = 0, None
    for i in order:
        b, e, name = begins[i], ends[i], names[i]
        if data_size is not None and e > data_size:
            issues.append(
                Issue(
                    f"tensor '{name}': data_offsets end beyond the data section",
                    file=label,
                    path=_where(name, "data_offsets"),
                    expected=f"end <= {data_size:,} (file size - 8 - header length)",
                    got=f"[{b}, {e}]",
                    hint="the file is truncated (an interrupted download?) or the header is corrupt",
                )
            )
        if b < pos:
            issues.append(
                Issue(
                    f"tensor '{name}': data_offsets [{b}, {e}] overlap tensor '{prev}' (ends at {pos})",
                    file=label,
                    path=_where(name, "data_offsets"),
                )
            )
        elif b > pos:
            where = f"after tensor '{prev}'" if prev is not None else "at the start of the data section"
            issues.append(
                Issue(
                    f"tensor '{name}': {b - pos:,} bytes [{pos}, {b}) {where} belong to no tensor",
                    file=label,
                    path=_where(name, "data_offsets"),
                    hint="safetensors requires tensors stored back to back, covering the data section",
                )
            )
        if e >= pos:
            pos, prev = e, name
    if data_size is not None and pos < data_size:
        issues.append(
            Issue(
                f"{data_size - pos:,} bytes at the end of the data section belong to no tensor",
                file=label,
                expected=f"last tensor ending at {data_size:,}",
                got=f"{pos:,}",
                hint="safetensors requires the last tensor to end at the end of the file",
            )
        )
    return issues


def read_safetensors_file(path: str | Path, *, file: str | None = None, label: str | None = None) -> FileTensors:
    """The checked tensors of one local ``.safetensors`` file (header only)."""
    label = label or str(path)
    raw, data_size = read_header_bytes(path, label)
    return header_tensors(decode_header(raw, label), file=file or Path(path).name, label=label, data_size=data_size)


# --------------------------------------------------------------------------- shard sets


def read_weight_map(path: str | Path, label: str | None = None) -> dict[str, str]:
    """``weight_map`` of a ``*.safetensors.index.json``: tensor name -> shard file."""
    label = label or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(label, f"cannot read the index: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        index = jsonfile.loads(text, duplicates="differing")
    except jsonfile.JsonDuplicateKeyError as exc:
        raise fail(
            label,
            f"index names {exc.key!r} twice, with different values",
            path="$.weight_map",
            hint="a tensor is stored in one shard; the index is corrupt",
        ) from None
    except json.JSONDecodeError as exc:
        raise fail(label, f"index is not valid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except jsonfile.JsonLimitError as exc:
        raise fail(label, f"index: {exc}", hint="an index nests 2 levels; the file is corrupt") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise fail(
            label,
            "index must hold a weight_map object of tensor name -> shard file",
            path="$.weight_map",
            got=type(weight_map).__name__,
        )
    return weight_map


def check_weight_map(weight_map: Mapping[str, str], parts: Iterable[FileTensors], label: str) -> list[Issue]:
    """Index and headers agree: every indexed tensor is in the header of its shard, every header tensor
    is indexed to its own shard, and no tensor is stored twice."""
    issues: list[Issue] = []
    where: dict[str, str] = {}
    for part in parts:
        for name in part.names:
            other = where.setdefault(name, part.file)
            if other != part.file:
                issues.append(
                    Issue(f"tensor '{name}' is stored in two shards: '{other}' and '{part.file}'", file=label)
                )
    for name, shard in weight_map.items():
        found = where.get(name)
        if found != shard:
            extra = f"; it is in '{found}'" if found else ""
            issues.append(
                Issue(
                    f"index maps tensor '{name}' to shard '{shard}', whose header has no such tensor{extra}",
                    file=label,
                    path=f"$.weight_map[{json.dumps(name)}]",
                )
            )
    for name, shard in where.items():
        if name not in weight_map:
            issues.append(Issue(f"tensor '{name}' of shard '{shard}' is not in the index's weight_map", file=label))
    return issues


def is_inside_name(name: str) -> bool:
    """Whether a file name written in a checkpoint (an index's shard) names a file inside the
    checkpoint's folder: relative, no ``..`` component, no drive, backslash or NUL.  Checked
    on the name, not on the resolved path: a Hugging Face snapshot's files are links into its
    blob store, which are inside the checkpoint although they resolve elsewhere."""
    if not name or "\\" in name or "\x00" in name or re.match(r"[A-Za-z]:", name):
        return False
    parts = PurePosixPath(name).parts
    return not PurePosixPath(name).is_absolute() and ".." not in parts and parts != ()


def read_shard_set(directory: str | Path, index: str | Path) -> list[FileTensors]:
    """Every shard header of an index; missing shards and all shard problems are reported together."""
    directory, index = Path(directory), Path(index)
    weight_map = read_weight_map(index)
    shards = sorted(set(weight_map.values()))
    outside = [s for s in shards if not is_inside_name(s)]
    if outside:  # refused before any of them is opened: nothing of a file outside is read or shown
        raise CheckpointError(
            f"{index}: {len(outside)} shard file name(s) in the index point outside the checkpoint folder",
            [
                Issue(
                    "a shard file of the index must be a file of the checkpoint's folder",
                    file=str(index),
                    path="$.weight_map",
                    got=json.dumps(s),
                    hint="shard names are relative: no leading '/', no '..', no drive or backslash",
                )
                for s in outside
            ],
        )
    missing = [s for s in shards if not (directory / s).is_file()]
    if missing:
        raise CheckpointError(
            f"{index}: {len(missing)} of {len(shards)} shards listed in the index are missing: {', '.join(missing)}",
            [Issue("shard listed in the index is missing", file=str(directory / s)) for s in missing],
        )
    parts: list[FileTensors] = []
    issues: list[Issue] = []
    for shard in shards:
        try:
            parts.append(read_safetensors_file(directory / shard, file=shard))
        except CheckpointError as exc:
            issues += exc.issues
    if not issues:
        issues = check_weight_map(weight_map, parts, str(index))
    raise_issues(f"{index}: {len(issues)} problem(s) in the shard set", issues)
    return parts
