"""GGUF headers (versions 2 and 3, little-endian): metadata key/values and tensor infos, never tensor data.

Layout (ggml-org/ggml ``docs/gguf.md``): magic ``GGUF``, u32 version, u64 tensor count, u64 key/value
count, the key/values (string key, u32 value type, value; arrays nest), then per tensor: string name,
u32 n_dims, u64 dims innermost-first, u32 ggml type, u64 offset relative to the data section.  The data
section starts at the end of the tensor infos rounded up to ``general.alignment`` (default 32).

Byte sizes come from the ggml type's block: ``bytes = elements / block_size * type_size``.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsql.errors import Issue
from archsql.ingest.safetensors_headers import MAX_INT64, FileTensors, fail, raise_issues

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
QK_K = 256

# ggml type id -> (name, block size in elements, block size in bytes); GGML_QUANT_SIZES in
# ggml-org/llama.cpp gguf-py/gguf/constants.py (ids 4, 5, 31-33, 36-38 are retired).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 4 + 4 + 32),
    10: ("Q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),
    11: ("Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    12: ("Q4_K", QK_K, 2 + 2 + QK_K // 2 + 12),
    13: ("Q5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    14: ("Q6_K", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    15: ("Q8_K", QK_K, 4 + QK_K + QK_K // 8),
    16: ("IQ2_XXS", QK_K, 2 + QK_K // 4),
    17: ("IQ2_XS", QK_K, 2 + QK_K // 4 + QK_K // 32),
    18: ("IQ3_XXS", QK_K, 2 + QK_K // 4 + QK_K // 8),
    19: ("IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: ("IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    23: ("IQ4_XS", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", QK_K, 2 + 4 * 13),
    35: ("TQ2_0", QK_K, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
    40: ("NVFP4", 64, 4 + 32),
    41: ("Q1_0", 128, 2 + 16),
}
GGML_BLOCKS: dict[str, tuple[int, int]] = {name: (block, size) for name, block, size in GGML_TYPES.values()}

# GGUF metadata value types: id -> struct format (8 = string and 9 = array are read apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# Arrays may hold arrays; real files hold flat ones (token lists, per-layer counts).  Each level
# costs only 12 bytes, so a small file could nest deeper than Python recurses: bounded here.
MAX_ARRAY_DEPTH = 8
# A header is read for its tensors and a few model facts; an array longer than this (a real
# tokenizer holds ~256k tokens) is stepped over, keeping its element type and length only, so a
# large honest file costs no more memory than a small one.
MAX_KEPT_ARRAY = 1 << 20


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array longer than MAX_KEPT_ARRAY: its element type id and length."""

    element_type: int
    count: int


def ggml_nbytes(ggml_type: str, n_elements: int) -> int:
    """Bytes of ``n_elements`` stored as ``ggml_type`` (a whole number of blocks)."""
    block, size = GGML_BLOCKS[ggml_type]
    return n_elements // block * size


@dataclass
class GgufHeader:
    version: int
    metadata: dict[str, Any]
    alignment: int
    data_start: int  # absolute file offset of the data section
    tensors: FileTensors  # shapes row-major (GGUF dims reversed), offsets relative to data_start


class _Truncated(Exception):
    pass


class _Reader:
    """Little-endian cursor over the mapped file."""

    def __init__(self, buf: Any):
        self.buf, self.pos, self.size = buf, 0, len(buf)

    def many(self, code: str, count: int = 1) -> tuple:
        n = struct.calcsize(code) * count
        if self.pos + n > self.size:
            raise _Truncated
        values = struct.unpack_from(f"<{count}{code}", self.buf, self.pos)
        self.pos += n
        return values

    def one(self, code: str) -> Any:
        return self.many(code)[0]

    def raw_string(self) -> bytes:
        n = self.one("Q")
        if self.pos + n > self.size:
            raise _Truncated
        self.pos += n
        return bytes(self.buf[self.pos - n : self.pos])

    def value(self, vtype: int, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            return self.one(_SCALARS[vtype])
        if vtype == _STRING:
            return self.raw_string().decode("utf-8", "replace")
        if vtype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise ValueError(f"arrays nested more than {MAX_ARRAY_DEPTH} levels deep at byte {self.pos}")
            etype, count = self.one("I"), self.one("Q")
            if count > MAX_KEPT_ARRAY:
                self.skip(etype, depth + 1, count)
                return SkippedArray(etype, count)
            if etype in _SCALARS:
                return list(self.many(_SCALARS[etype], count))
            return [self.value(etype, depth + 1) for _ in range(count)]
        raise ValueError(f"unknown GGUF value type {vtype} at byte {self.pos - 4}")

    def skip(self, vtype: int, depth: int, count: int = 1) -> None:
        """Step over ``count`` values of ``vtype`` without building them (scalars in one step;
        strings by their lengths; arrays element by element, depth-bounded)."""
        if vtype in _SCALARS:
            n = struct.calcsize(_SCALARS[vtype]) * count
            if self.pos + n > self.size:
                raise _Truncated
            self.pos += n
            return
        for _ in range(count):
            if vtype == _STRING:
                n = self.one("Q")
                if self.pos + n > self.size:
                    raise _Truncated
                self.pos += n
            elif vtype == _ARRAY:
                if depth >= MAX_ARRAY_DEPTH:
                    raise ValueError(f"arrays nested more than {MAX_ARRAY_DEPTH} levels deep at byte {self.pos}")
                etype, inner = self.one("I"), self.one("Q")
                self.skip(etype, depth + 1, inner)
            else:
                raise ValueError(f"unknown GGUF value type {vtype} at byte {self.pos - 4}")


def read_gguf_header(path: str | Path, *, file: str | None = None, label: str | None = None) -> GgufHeader:
    """Parse and check the header of a local ``.gguf`` file."""
    label = label or str(path)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < 24:
                raise fail(label, "file is too short for a GGUF header", got=f"{size} bytes")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(_Reader(buf), file or Path(path).name, label)
    except FileNotFoundError:
        raise fail(label, "file not found") from None
    except IsADirectoryError:
        raise fail(label, "is a directory, not a GGUF file") from None
    except OSError as exc:
        raise fail(label, f"cannot read file: {exc.strerror}") from None


def _parse(r: _Reader, file: str, label: str) -> GgufHeader:
    if bytes(r.buf[:4]) != MAGIC:
        raise fail(label, "not a GGUF file", expected="magic 'GGUF'", got=repr(bytes(r.buf[:4])))
    r.pos = 4
    version = r.one("I")
    if version not in (2, 3):
        hint = "big-endian GGUF files are not supported" if version & 0xFFFF == 0 else "versions 2 and 3 are supported"
        raise fail(label, f"unsupported GGUF version {version}", hint=hint)
    what = "the header counts"
    try:
        n_tensors, n_kv = r.many("Q", 2)
        metadata: dict[str, Any] = {}
        repeated: list[str] = []
        for i in range(n_kv):
            what = f"metadata key/value #{i}"
            key = r.raw_string().decode("utf-8", "replace")
            what = f"metadata value '{key}'"
            if key in metadata:
                repeated.append(key)
            metadata[key] = r.value(r.one("I"))
        infos = []
        for i in range(n_tensors):
            what = f"tensor info #{i}"
            name = r.raw_string()
            n_dims = r.one("I")
            if n_dims > MAX_DIMS:
                raise ValueError(f"{n_dims} dims, more than ggml's {MAX_DIMS}")
            dims = list(r.many("Q", n_dims))
            gtype, offset = r.one("I"), r.one("Q")
            infos.append((name, dims, gtype, offset))
    except _Truncated:
        raise fail(
            label, f"file ends inside the GGUF header (reading {what} at byte {r.pos})", hint="the file is truncated"
        ) from None
    except ValueError as exc:
        raise fail(label, f"{exc} (reading {what})") from None
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    issues: list[Issue] = [Issue(f"metadata key '{key}' appears twice", file=label) for key in repeated]
    if type(alignment) is not int or alignment <= 0 or alignment % 8 or alignment & (alignment - 1):
        # ggml (gguf.cpp, gguf_init_from_file_impl) requires a power of two
        issues.append(Issue("general.alignment must be a power of two, at least 8", file=label, got=repr(alignment)))
        alignment = DEFAULT_ALIGNMENT
    data_start = -(-r.pos // alignment) * alignment
    if data_start > r.size:
        issues.append(
            Issue(
                f"general.alignment {alignment:,} puts the tensor data at byte {data_start:,}, "
                f"beyond the end of the file ({r.size:,} bytes)",
                file=label,
                expected=f"an alignment that keeps the data section inside the file (default {DEFAULT_ALIGNMENT})",
                hint="the header is corrupt, or the file is truncated",
            )
        )
        raise_issues(f"{label}: {len(issues)} problem(s) in the GGUF header", issues)
    tensors = _tensors(infos, file, label, alignment, r.size - data_start, issues)
    raise_issues(f"{label}: {len(issues)} problem(s) in the GGUF header", issues)
    return GgufHeader(version, metadata, alignment, data_start, tensors)


def _tensors(infos: list, file: str, label: str, alignment: int, data_size: int, issues: list[Issue]) -> FileTensors:
    out = FileTensors(file)
    seen: set[str] = set()
    for raw_name, dims, gtype, offset in infos:
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            name = raw_name.decode("utf-8", "backslashreplace")
            issues.append(Issue(f"tensor name {name!r} is not valid UTF-8", file=label))
            continue
        if name in seen:
            issues.append(Issue(f"tensor '{name}' appears twice", file=label))
            continue
        seen.add(name)
        if gtype not in GGML_TYPES:
            known = [t[0] for t in GGML_TYPES.values()]
            issues.append(
                Issue(f"tensor '{name}': unknown ggml type id {gtype}", file=label, hint="known: " + " ".join(known))
            )
            continue
        dtype, block, bsize = GGML_TYPES[gtype]
        if dims and dims[0] % block:
            issues.append(
                Issue(
                    f"tensor '{name}': innermost dim {dims[0]} is not a multiple of the {dtype} block of {block}",
                    file=label,
                )
            )
            continue
        if any(d > MAX_INT64 for d in dims):  # GGUF dims are u64; a zero-element tensor may hold any
            issues.append(
                Issue(
                    f"tensor '{name}': a dim of {max(dims):,} is beyond the store's int64 range",
                    file=label,
                    expected=f"dims <= {MAX_INT64:,}",
                    hint="no tensor has such a dim; the header is corrupt",
                )
            )
            continue
        if offset % alignment:
            issues.append(Issue(f"tensor '{name}': offset {offset} is not aligned to {alignment}", file=label))
        n = 1
        for d in dims:
            n *= d
        out.names.append(name)
        out.dtypes.append(dtype)
        out.shapes.append(dims[::-1])
        out.begins.append(offset)
        out.ends.append(offset + n // block * bsize)
    order = sorted(range(len(out.names)), key=out.begins.__getitem__)
    pos, prev = 0, None
    for i in order:
        name, b, e = out.names[i], out.begins[i], out.ends[i]
        if b < pos:
            issues.append(
                Issue(f"tensor '{name}': data [{b}, {e}) overlaps tensor '{prev}' (ends at {pos})", file=label)
            )
        if e > data_size:
            issues.append(
                Issue(
                    f"tensor '{name}': data [{b}, {e}) ends beyond the end of the file",
                    file=label,
                    expected=f"end <= {data_size:,} (file size - data section start)",
                    hint="the file is truncated, or one part of a split GGUF",
                )
            )
        if e > pos:
            pos, prev = e, name
    return out
