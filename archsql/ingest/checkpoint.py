"""``read_checkpoint``: the ``checkpoint_tensors`` table of a checkpoint, from its headers only.

Sources, tried in this order:

1. an existing local path: a ``.safetensors`` file, a ``.gguf`` file, a ``*.safetensors.index.json``, a
   folder with ``model.safetensors.index.json`` (shard set) or ``model.safetensors`` (or else exactly one
   ``*.safetensors.index.json``, ``*.safetensors`` or ``*.gguf``), a Hugging Face snapshot folder
   (``models--org--name/snapshots/<commit>``: a plain folder) or a repo cache folder
   (``models--org--name``: ``revision``, default ``main``, resolved through ``refs/``);
2. a repo id (``org/name``, ``org/name@rev`` or ``hub:org/name@rev``): with ``offline=True`` (or
   ``HF_HUB_OFFLINE=1``) from the local hub cache, else from the Hub (``endpoint`` or ``HF_ENDPOINT``).

The ``checkpoint`` column is the path as given for local paths and ``hub:<repo>@<revision>`` for repos
(the commit hash when read from the cache, the requested revision when read from the Hub).
"""

from __future__ import annotations

from itertools import accumulate, chain
from pathlib import Path

import pyarrow as pa
from huggingface_hub import constants

from archsql.errors import Issue
from archsql.ingest import hub
from archsql.ingest.gguf_headers import read_gguf_header
from archsql.ingest.safetensors_headers import (
    INDEX_FILE,
    SINGLE_FILE,
    CheckpointError,
    FileTensors,
    check_weight_map,
    header_tensors,
    raise_issues,
    read_safetensors_file,
    read_shard_set,
)
from archsql.ingest.tables import CHECKPOINT_TABLES

SCHEMA = CHECKPOINT_TABLES["checkpoint_tensors"]


def read_checkpoint(
    source: str | Path,
    *,
    offline: bool = False,
    revision: str | None = None,
    endpoint: str | None = None,
    cache_dir: str | Path | None = None,
) -> pa.Table:
    """One row per tensor of every file of the checkpoint (schema ``checkpoint_tensors``).

    ``cache_dir`` overrides the hub cache root (default: ``HF_HUB_CACHE``, else ``HF_HOME/hub``)."""
    path = Path(source).expanduser()
    if path.exists():
        return _read_path(path, str(source), revision)
    text = str(source)
    repo_id, rev = hub.parse_repo(text)
    if isinstance(source, Path) or not hub.is_repo_id(repo_id):
        raise CheckpointError(
            f"{text}: no such file or folder, and not a Hub repo id",
            [Issue("checkpoint not found", file=text, hint="give a .safetensors/.gguf file, a folder, or org/name")],
        )
    revision = revision or rev
    if offline or constants.is_offline_mode():
        root = Path(cache_dir) if cache_dir is not None else hub.hub_cache_dir()
        folder, commit = hub.cached_snapshot(repo_id, revision, root)
        return _read_folder(folder, f"hub:{repo_id}@{commit}")
    headers, weight_map = hub.hub_headers(repo_id, revision, endpoint)
    checkpoint = f"hub:{repo_id}@{revision or constants.DEFAULT_REVISION}"
    parts: list[FileTensors] = []
    issues: list[Issue] = []
    for file, header in headers.items():
        try:
            parts.append(header_tensors(header, file=file, label=f"{checkpoint}/{file}", data_size=None))
        except CheckpointError as exc:
            issues += exc.issues
    if weight_map is not None and not issues:
        issues = check_weight_map(weight_map, parts, f"{checkpoint}/{INDEX_FILE}")
    raise_issues(f"{checkpoint}: {len(issues)} problem(s) in the checkpoint headers", issues)
    return to_table(checkpoint, "safetensors", parts)


def _read_path(path: Path, checkpoint: str, revision: str | None) -> pa.Table:
    repo_id = hub.repo_of_cache_folder(path)
    if path.is_dir() and repo_id and (path / "snapshots").is_dir():
        folder, commit = hub.cached_snapshot(repo_id, revision, path.parent)
        return _read_folder(folder, f"hub:{repo_id}@{commit}")
    if revision is not None:
        raise CheckpointError(
            f"{checkpoint}: a revision applies to a Hub repo id or a repo cache folder (models--org--name)",
            [Issue("revision given for a plain local path", file=checkpoint, got=revision)],
        )
    if path.is_dir():
        return _read_folder(path, checkpoint)
    if path.name.endswith(".safetensors.index.json"):
        return to_table(checkpoint, "safetensors", read_shard_set(path.parent, path))
    if path.suffix == ".gguf":
        return to_table(checkpoint, "gguf", [read_gguf_header(path).tensors])
    return to_table(checkpoint, "safetensors", [read_safetensors_file(path)])


def _read_folder(folder: Path, checkpoint: str) -> pa.Table:
    if (folder / INDEX_FILE).is_file():
        return to_table(checkpoint, "safetensors", read_shard_set(folder, folder / INDEX_FILE))
    if (folder / SINGLE_FILE).is_file():
        return to_table(checkpoint, "safetensors", [read_safetensors_file(folder / SINGLE_FILE)])
    for pattern in ("*.safetensors.index.json", "*.safetensors", "*.gguf"):
        found = sorted(folder.glob(pattern))
        if len(found) == 1:
            return _read_path(found[0], checkpoint, None)
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise CheckpointError(
                f"{folder}: several {pattern} files and no {INDEX_FILE}",
                [Issue(f"ambiguous checkpoint: {names}", file=str(folder), hint="give the file to read")],
            )
    raise CheckpointError(
        f"{folder}: no {INDEX_FILE}, {SINGLE_FILE}, *.safetensors or *.gguf file",
        [Issue("no checkpoint file in the folder", file=str(folder))],
    )


def to_table(checkpoint: str, fmt: str, parts: list[FileTensors]) -> pa.Table:
    """Columns of every file, built in bulk (no per-row objects)."""
    names = list(chain.from_iterable(p.names for p in parts))
    n = len(names)
    shapes = list(chain.from_iterable(p.shapes for p in parts))
    offsets = pa.array(list(accumulate((len(s) for s in shapes), initial=0)), pa.int32())
    columns = [
        pa.array([checkpoint] * n, pa.string()),
        pa.array([fmt] * n, pa.string()),
        pa.array(list(chain.from_iterable([p.file] * len(p.names) for p in parts)), pa.string()),
        pa.array(names, pa.string()),
        pa.array(list(chain.from_iterable(p.dtypes for p in parts)), pa.string()),
        pa.ListArray.from_arrays(offsets, pa.array(list(chain.from_iterable(shapes)), pa.int64())),
        pa.array(list(chain.from_iterable(p.begins for p in parts)), pa.int64()),
        pa.array(list(chain.from_iterable(p.ends for p in parts)), pa.int64()),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMA)
