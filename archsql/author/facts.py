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

Hub access (:func:`gather_hub`) reads the small config files and the safetensors headers from
the Hugging Face cache first, else through ``huggingface_hub`` (``hf_hub_download`` for the
small files, ``get_safetensors_metadata`` for headers) — never weights; offline, the cache only.
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


def gather(
    source: str | Path, out: str | Path, *, meta_inventory: str | Path | None = None, build_inventory: bool = False
) -> Facts:
    """Gather the facts of a local checkpoint folder (or a bare ``config.json``) into ``out``.
    ``build_inventory`` (no ``meta_inventory`` given): build one on the fly
    (:func:`build_meta_inventory`, needs torch + transformers) for the params guard."""
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
    elif build_inventory:
        built = build_meta_inventory(dest)
        with gzip.open(dest / INVENTORY, "wt", encoding="utf-8") as f:
            json.dump(built, f)
        provenance["files"][INVENTORY] = {"from": built["built_by"], "sha256": _sha256(dest / INVENTORY)}
    if tensors is not None:
        pq.write_table(tensors, dest / TENSORS)
    else:
        provenance["tensors"] = None
    (dest / PROVENANCE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return load(dest)


def build_meta_inventory(folder: str | Path, *, builder=None) -> dict[str, Any]:
    """A meta-device inventory built on the fly from ``folder``'s config.json: the model module
    made without weights (``builder(folder)``; default :func:`transformers_meta_model`, which
    needs torch and transformers), read through its ``state_dict``: ``tensors`` every entry,
    ``checkpoint_tensors`` the entries a save writes (a tensor tied to an earlier one is
    dropped), ``ignored_on_load`` the class's ``_keys_to_ignore_on_load_unexpected``.  Unlike a
    prepared inventory (tools/meta_inventory.py of the data), load-time renames are not
    reversed, so it serves the params guard, not as a tensor inventory."""
    module = (builder or transformers_meta_model)(Path(folder))
    state = module.state_dict(keep_vars=True)
    seen: dict[int, str] = {}
    tensors, saved, tied = [], [], {}
    for name, t in state.items():
        row = {"name": name, "shape": [int(d) for d in t.shape], "dtype": str(t.dtype).removeprefix("torch.")}
        tensors.append(row)
        if id(t) in seen:
            tied[name] = seen[id(t)]
            continue
        seen[id(t)] = name
        saved.append(row)
    ignored = getattr(module, "_keys_to_ignore_on_load_unexpected", None) or []
    return {
        "built_by": f"archsql {__version__} build_meta_inventory ({type(module).__name__})",
        "tensors": tensors,
        "checkpoint_tensors": saved,
        "tied_weights": tied,
        "ignored_on_load": [p for p in ignored if isinstance(p, str)],
        "notes": "built on the fly from the module's state_dict on the meta device; load-time renames not reversed",
    }


def transformers_meta_model(folder: Path):
    """The model class transformers maps ``folder/config.json`` to, built on torch's meta
    device (no weights, no remote code), in the config's dtype."""
    from importlib import import_module

    try:  # transformers first: without it, torch (slow to import) is never loaded
        transformers = import_module("transformers")
        torch = import_module("torch")
    except ImportError as exc:
        raise FactsError(
            issues=[
                Issue(
                    f"building a meta-device inventory needs torch and transformers ({exc.name} is not installed)",
                    file=str(folder / CONFIG),
                    hint="pip install transformers (and torch), or give a prepared inventory with --inventory",
                )
            ]
        ) from None
    try:
        config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False)
        with torch.device("meta"):
            try:
                model = transformers.AutoModelForCausalLM.from_config(config)
            except ValueError:  # not a causal LM class (an encoder, a multimodal wrapper)
                model = transformers.AutoModel.from_config(config)
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise FactsError(
            issues=[
                Issue(
                    f"transformers cannot build this config on the meta device: {exc}",
                    file=str(folder / CONFIG),
                    hint="give a prepared inventory with --inventory (remote-code models are never run)",
                )
            ]
        ) from None
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    return model.to(dtype) if isinstance(dtype, torch.dtype) else model


def _gzip_copy(path: Path, target: Path, provenance: dict) -> None:
    with path.open("rb") as f, gzip.open(target, "wb") as g:
        shutil.copyfileobj(f, g)
    provenance["files"][INVENTORY] = {"from": str(path.resolve()), "sha256": _sha256(path)}


def _hub_file(repo_id: str, name: str, revision: str | None, cache_dir: Path | None, offline: bool) -> Path | None:
    """One small file of a Hub repo: from the HF cache first (``try_to_load_from_cache``), else
    downloaded (``hf_hub_download``) unless ``offline``.  None: the repo has no such file (or,
    offline, the cache does not hold it)."""
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    from archsql.ingest import hub

    root = cache_dir or hub.hub_cache_dir()
    cached = try_to_load_from_cache(repo_id, name, cache_dir=root, revision=revision)
    if isinstance(cached, str):
        return Path(cached)
    if cached is not None or offline:  # known absent (the cache's .no_exist marker), or not cached offline
        return None
    try:
        try:
            return Path(hf_hub_download(repo_id, name, revision=revision, cache_dir=root))
        except hf_errors.LocalEntryNotFoundError:
            raise  # no connection and not cached (a subclass of EntryNotFoundError: caught first)
        except hf_errors.EntryNotFoundError:
            return None  # the Hub says the repo has no such file
    except (hf_errors.HTTPError, hf_errors.OfflineModeIsEnabled, hf_errors.LocalEntryNotFoundError, OSError) as exc:
        label = f"hub:{repo_id}@{revision or 'main'}"
        raise FactsError(
            issues=[
                Issue(
                    f"cannot fetch {name} of {repo_id} from the Hub: {hub._describe(exc)}",
                    file=label,
                    got=str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__,
                    hint="without a network, put the repo in the Hugging Face cache first "
                    f"(`hf download {repo_id} config.json '*.safetensors.index.json'`) and run with --offline, "
                    "or give a local checkpoint folder",
                )
            ]
        ) from None


def _remote_code_files(config: dict) -> list[str]:
    """The ``*.py`` files a config's ``auto_map`` names (``modeling_x.Class`` → ``modeling_x.py``;
    ``repo--modeling_x.Class`` points into another repo and is left out)."""
    names: set[str] = set()
    auto_map = config.get("auto_map")
    if isinstance(auto_map, dict):
        for value in auto_map.values():
            for ref in value if isinstance(value, list) else [value]:
                if isinstance(ref, str) and "--" not in ref and "." in ref:
                    names.add(ref.rsplit(".", 1)[0] + ".py")
    return sorted(names)


def gather_hub(
    repo_id: str,
    out: str | Path,
    *,
    revision: str | None = None,
    offline: bool = False,
    cache_dir: str | Path | None = None,
    meta_inventory: str | Path | None = None,
    build_inventory: bool = False,
) -> Facts:
    """Gather the facts of a Hub repo: ``config.json`` (required), ``generation_config.json``,
    ``hf_quant_config.json`` and the remote-code ``*.py`` its ``auto_map`` names, each from the
    HF cache first and else downloaded (small files only); the tensor inventory from the cached
    safetensors headers, else through ``HfApi.get_safetensors_metadata`` (header bytes by range
    requests, never weights).  ``offline``: the cache only; a repo it does not hold is an error,
    cached configs without cached headers give facts without a tensor inventory (said in the
    provenance)."""
    from huggingface_hub import constants

    from archsql.ingest import hub, read_checkpoint

    repo_id, rev = hub.parse_repo(repo_id)
    revision = revision or rev
    offline = offline or constants.is_offline_mode()
    if not hub.is_repo_id(repo_id):
        raise FactsError(
            issues=[
                Issue(
                    f"'{repo_id}' is neither a local folder nor a Hub repo id",
                    hint="give a checkpoint folder holding config.json, or a repo id such as Qwen/Qwen3-0.6B",
                )
            ]
        )
    root = Path(cache_dir) if cache_dir is not None else None
    label = f"hub:{repo_id}@{revision or 'main'}"
    config = _hub_file(repo_id, CONFIG, revision, root, offline)
    if config is None:
        where = "in the local Hugging Face cache" if offline else "on the Hub"
        raise FactsError(
            issues=[
                Issue(
                    f"no {CONFIG} of {repo_id} {where}",
                    file=str(root or hub.hub_cache_dir()) if offline else label,
                    hint=f"download it first (`hf download {repo_id} {CONFIG}`) or run without --offline"
                    if offline
                    else "check the repo id and the revision",
                )
            ]
        )
    dest = Path(out)
    staging = dest / ".hub"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(config, staging / CONFIG)
    origins = {CONFIG: str(config)}
    for name in (*OPTIONAL_FILES, *_remote_code_files(_read_json(config))):
        path = _hub_file(repo_id, name, revision, root, offline)
        if path is not None:
            shutil.copyfile(path, staging / name)
            origins[name] = str(path)
    facts = gather(staging, dest, meta_inventory=meta_inventory, build_inventory=build_inventory)
    provenance = facts.provenance
    provenance["source"] = label
    for name, origin in origins.items():
        key = f"{SOURCE_DIR}/{name}" if name.endswith(".py") else name
        if key in provenance["files"]:
            provenance["files"][key]["from"] = f"{label}/{name} ({origin})"
    tensors, how, missing = None, None, None
    try:
        tensors = read_checkpoint(repo_id, offline=True, revision=revision, cache_dir=root)
        how = "safetensors headers of the HF cache snapshot (no weight bytes)"
    except CheckpointError as exc:
        missing = exc
    if tensors is None and not offline:
        try:
            tensors = read_checkpoint(repo_id, revision=revision)
            how = "safetensors headers by HfApi.get_safetensors_metadata (range requests, no weight bytes)"
        except CheckpointError as exc:
            missing = exc
    if tensors is not None:
        pq.write_table(tensors, dest / TENSORS)
        provenance["tensors"] = {"from": label, "how": how}
    elif provenance.get("tensors") is None:
        provenance["tensors"] = None
        provenance["tensors_missing"] = str(missing).splitlines()[0] if missing else "no safetensors headers"
    (dest / PROVENANCE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")
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
