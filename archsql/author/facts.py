"""The facts bundle: everything an author (agent or person) and the guards know about one
checkpoint, gathered once into one folder with its provenance.

A bundle folder holds:

- ``config.json`` (required), ``generation_config.json`` and ``hf_quant_config.json`` when
  the source has them (a ``quantization_config`` inside config.json stays there);
- ``tensors.parquet``: the checkpoint's tensor inventory (schema ``checkpoint_tensors``), read
  from the source's safetensors/GGUF headers by :func:`archsql.ingest.read_checkpoint` (never
  weight bytes); when the source has no checkpoint files and a meta inventory is given, its
  ``checkpoint_tensors`` (transformers' own on-disk names and shapes) with the build dtype;
- ``meta_inventory.json.gz``: the meta-device module inventory, when given;
- ``source/``: the modeling ``*.py`` files of the source folder (for the source guard);
- ``provenance.json``: where every file came from (path, sha256), how the tensors were read.

Hub access (:func:`gather_hub`) reads config files and headers through ``huggingface_hub``
metadata calls only.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from archsql import __version__
from archsql.errors import ArchsqlError, CheckpointError, ConfigError, Issue

CONFIG = "config.json"
OPTIONAL_FILES = ("generation_config.json", "hf_quant_config.json")
TENSORS = "tensors.parquet"
INVENTORY = "meta_inventory.json.gz"
SOURCE_DIR = "source"
PROVENANCE = "provenance.json"
CHECKPOINT_GLOBS = ("*.safetensors", "*.safetensors.index.json", "*.gguf")
# the torch dtype names of a meta inventory, as safetensors dtypes
_TORCH_DTYPES = {
    "bfloat16": "BF16",
    "float16": "F16",
    "float32": "F32",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "uint8": "U8",
    "int8": "I8",
    "int32": "I32",
    "int64": "I64",
}


class FactsError(ArchsqlError, ValueError):
    """A facts bundle that cannot be gathered or read."""


@dataclass
class Facts:
    """A facts bundle read back from its folder."""

    folder: Path
    config: dict[str, Any]
    provenance: dict[str, Any]
    tensors: pa.Table | None = None
    inventory: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # generation / quant configs by file name

    @property
    def config_path(self) -> Path:
        return self.folder / CONFIG

    @property
    def source_dir(self) -> Path | None:
        d = self.folder / SOURCE_DIR
        return d if d.is_dir() and any(d.glob("*.py")) else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_json(path: Path) -> Any:
    from archsql.ingest.jsonfile import loads

    try:
        return loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise FactsError(issues=[Issue(f"cannot read JSON: {exc}", file=str(path))]) from None


def _read_inventory(path: Path) -> dict[str, Any]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise FactsError(
            issues=[Issue(f"cannot read the meta inventory: {exc}", file=str(path), hint="give a .json or .json.gz")]
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("checkpoint_tensors"), list):
        raise FactsError(
            issues=[
                Issue(
                    "not a meta inventory: no 'checkpoint_tensors' list",
                    file=str(path),
                    hint="a meta inventory holds tensors and checkpoint_tensors (see /work/shared/data/meta_inventories/SOURCES.md)",
                )
            ]
        )
    return data


def inventory_table(inventory: dict[str, Any], checkpoint: str) -> pa.Table:
    """A ``checkpoint_tensors`` table of a meta inventory's ``checkpoint_tensors``: names and
    shapes as transformers would save them, dtypes as built (the inventory's dtype is the
    build dtype, not a per-tensor disk dtype), laid out back to back in one file."""
    from archsql.dtypes import DTYPE_BITS
    from archsql.ingest.checkpoint import to_table
    from archsql.ingest.safetensors_headers import FileTensors

    part = FileTensors("model.safetensors")
    pos = 0
    for i, t in enumerate(inventory["checkpoint_tensors"]):
        dtype = _TORCH_DTYPES.get(str(t.get("dtype")))
        if dtype is None or not isinstance(t.get("name"), str) or not isinstance(t.get("shape"), list):
            raise FactsError(
                issues=[Issue("unreadable inventory tensor", path=f"$.checkpoint_tensors[{i}]", got=repr(t)[:120])]
            )
        size = math.prod(t["shape"]) * DTYPE_BITS[dtype] // 8
        part.names.append(t["name"])
        part.dtypes.append(dtype)
        part.shapes.append(list(t["shape"]))
        part.begins.append(pos)
        part.ends.append(pos + size)
        pos += size
    return to_table(checkpoint, "safetensors", [part])


def gather(source: str | Path, out: str | Path, *, meta_inventory: str | Path | None = None) -> Facts:
    """Gather the facts of a local checkpoint folder (or a bare ``config.json``) into ``out``."""
    src = Path(source).expanduser()
    if not src.exists():
        raise FactsError(
            issues=[Issue("no such file or folder", file=str(src), hint="give a checkpoint folder holding config.json")]
        )
    folder = src if src.is_dir() else src.parent
    config_file = src if src.is_file() else src / CONFIG
    if not config_file.is_file():
        raise FactsError(
            issues=[
                Issue(f"no {CONFIG} in the folder", file=str(folder), hint="a facts bundle starts from config.json")
            ]
        )
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    provenance: dict[str, Any] = {"archsql_version": __version__, "source": str(src.resolve()), "files": {}}

    def keep(path: Path, name: str) -> None:
        shutil.copyfile(path, dest / name)
        provenance["files"][name] = {"from": str(path.resolve()), "sha256": _sha256(path)}

    config = _read_json(config_file)
    if not isinstance(config, dict):
        raise FactsError(issues=[Issue("config.json must hold an object", file=str(config_file))])
    keep(config_file, CONFIG)
    if src.is_dir():
        for name in OPTIONAL_FILES:
            if (folder / name).is_file():
                keep(folder / name, name)
        sources = sorted(p for p in folder.glob("*.py") if p.is_file())
        if sources:
            (dest / SOURCE_DIR).mkdir(exist_ok=True)
            for p in sources:
                keep(p, f"{SOURCE_DIR}/{p.name}")
    tensors = None
    has_checkpoint = src.is_dir() and any(any(folder.glob(g)) for g in CHECKPOINT_GLOBS)
    if has_checkpoint:
        from archsql.ingest import read_checkpoint

        tensors = read_checkpoint(folder)
        provenance["tensors"] = {"from": str(folder.resolve()), "how": "checkpoint headers (no weight bytes)"}
    inventory = None
    if meta_inventory is not None:
        path = Path(meta_inventory)
        inventory = _read_inventory(path)
        if path.suffix == ".gz":
            keep(path, INVENTORY)
        else:
            _gzip_copy(path, dest / INVENTORY, provenance)
        if tensors is None:
            tensors = inventory_table(inventory, f"inventory:{path.name}")
            provenance["tensors"] = {
                "from": str(path.resolve()),
                "how": "meta inventory checkpoint_tensors (names and shapes as transformers saves them; "
                "dtypes are the build dtype, not per-tensor disk dtypes)",
            }
    if tensors is not None:
        pq.write_table(tensors, dest / TENSORS)
    else:
        provenance["tensors"] = None
    (dest / PROVENANCE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return load(dest)


def _gzip_copy(path: Path, target: Path, provenance: dict) -> None:
    with path.open("rb") as f, gzip.open(target, "wb") as g:
        shutil.copyfileobj(f, g)
    provenance["files"][INVENTORY] = {"from": str(path.resolve()), "sha256": _sha256(path)}


def gather_hub(repo_id: str, out: str | Path, *, revision: str | None = None) -> Facts:  # pragma: no cover - network
    """Gather the facts of a Hub repo: its small config files downloaded, its safetensors
    headers read by range requests (:func:`archsql.ingest.read_checkpoint`), never weights."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import EntryNotFoundError

    from archsql.ingest import read_checkpoint

    dest = Path(out)
    staging = dest / ".hub"
    staging.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG, *OPTIONAL_FILES):
        try:
            path = hf_hub_download(repo_id, name, revision=revision)
        except EntryNotFoundError:
            if name == CONFIG:
                raise FactsError(issues=[Issue(f"{repo_id} has no {CONFIG}", hint="check the repo id")]) from None
            continue
        shutil.copyfile(path, staging / name)
    facts = gather(staging, dest)
    tensors = read_checkpoint(repo_id, revision=revision)
    pq.write_table(tensors, dest / TENSORS)
    facts.provenance["tensors"] = {"from": f"hub:{repo_id}", "how": "safetensors headers by range requests"}
    facts.provenance["source"] = f"hub:{repo_id}@{revision or 'main'}"
    (dest / PROVENANCE).write_text(json.dumps(facts.provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(staging)
    return load(dest)


def load(folder: str | Path) -> Facts:
    """Read a facts bundle folder (:func:`gather` wrote it)."""
    d = Path(folder).resolve()
    if not (d / CONFIG).is_file() or not (d / PROVENANCE).is_file():
        raise FactsError(
            issues=[
                Issue(
                    f"not a facts bundle (no {CONFIG} or {PROVENANCE})",
                    file=str(d),
                    hint="gather one first: archsql author CHECKPOINT_DIR (it writes facts/ in the output folder)",
                )
            ]
        )
    config = _read_json(d / CONFIG)
    if not isinstance(config, dict):
        raise ConfigError(issues=[Issue("config.json must hold an object", file=str(d / CONFIG))])
    provenance = _read_json(d / PROVENANCE)
    tensors = None
    if (d / TENSORS).is_file():
        try:
            tensors = pq.read_table(d / TENSORS)
        except (OSError, pa.ArrowInvalid) as exc:
            raise CheckpointError(
                issues=[Issue(f"unreadable tensor inventory: {exc}", file=str(d / TENSORS))]
            ) from None
    inventory = _read_inventory(d / INVENTORY) if (d / INVENTORY).is_file() else None
    extra = {name: _read_json(d / name) for name in OPTIONAL_FILES if (d / name).is_file()}
    return Facts(d, config, provenance, tensors, inventory, extra)
