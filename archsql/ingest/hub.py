"""Hugging Face locations: the local hub cache (offline) and the Hub itself (headers by range requests).

Cache paths are resolved by ``huggingface_hub``'s own helpers (``snapshot_download(local_files_only=True)``
resolves ``refs/<revision>`` to ``snapshots/<commit>``); only the cache root is computed here, because
``huggingface_hub.constants`` reads ``HF_HUB_CACHE``/``HF_HOME`` once at import and a caller may set them
later.  Hub headers come from ``HfApi.get_safetensors_metadata``, which fetches each file's first bytes by
HTTP range requests and never the weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils import validate_repo_id

from archsql.errors import Issue
from archsql.ingest.safetensors_headers import CheckpointError

# what a safetensors snapshot must hold complete (the tree-listing check of snapshot_download)
SAFETENSORS_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]
# Hub answers, transport failures (hf_errors.HTTPError is the HTTP client's base error) and malformed replies
_HUB_FAILURES = (
    hf_errors.HTTPError,
    hf_errors.NotASafetensorsRepoError,
    hf_errors.SafetensorsParsingError,
    OSError,
    ValueError,
    TypeError,
    KeyError,
)


def hub_cache_dir() -> Path:
    """The hub cache root, honouring ``HF_HUB_CACHE`` and ``HF_HOME`` as set now."""
    env = os.environ
    root = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not root and env.get("HF_HOME"):
        root = os.path.join(env["HF_HOME"], "hub")
    return Path(os.path.expandvars(os.path.expanduser(root or constants.HF_HUB_CACHE)))


def is_repo_id(text: str) -> bool:
    try:
        validate_repo_id(text)
    except hf_errors.HFValidationError:
        return False
    return "/" in text


def parse_repo(source: str) -> tuple[str, str | None]:
    """``hub:org/name@rev`` / ``org/name@rev`` / ``org/name`` -> (repo id, revision or None)."""
    text = source.removeprefix("hub:")
    repo, _, revision = text.partition("@")
    return repo, revision or None


def repo_of_cache_folder(folder: Path) -> str | None:
    """``models--org--name`` -> ``org/name`` (repo names cannot contain ``--``)."""
    kind, _, rest = folder.name.partition("--")
    return rest.replace("--", "/") if kind == "models" and rest else None


def cached_snapshot(repo_id: str, revision: str | None, cache_dir: Path) -> tuple[Path, str]:
    """The snapshot folder of a cached repo revision and its commit hash; no network."""
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=cache_dir,
            local_files_only=True,
            allow_patterns=SAFETENSORS_PATTERNS,
        )
    except hf_errors.IncompleteSnapshotError as exc:
        raise CheckpointError(
            f"hub:{repo_id}: the cached snapshot is incomplete", [Issue(str(exc), file=str(cache_dir))]
        ) from None
    except (hf_errors.LocalEntryNotFoundError, OSError, ValueError):
        rev = revision or constants.DEFAULT_REVISION
        raise CheckpointError(
            f"hub:{repo_id}@{rev}: not in the local Hugging Face cache and offline mode refuses the network",
            [
                Issue(
                    f"no snapshot of '{repo_id}' at revision '{rev}' under the hub cache",
                    file=str(cache_dir),
                    hint="download it first (`hf download REPO --include '*.json' '*.safetensors'`), point "
                    "HF_HUB_CACHE/HF_HOME at the cache that holds it, or read it online (offline=False, HF_HUB_OFFLINE unset)",
                )
            ],
        ) from None
    return Path(folder), Path(folder).name


def hub_headers(
    repo_id: str, revision: str | None, endpoint: str | None
) -> tuple[dict[str, dict], dict[str, str] | None]:
    """Every safetensors header of a Hub repo as ``{file: header dict}``, and the index's weight_map
    (None for a single ``model.safetensors``).  Only header bytes travel."""
    label = f"hub:{repo_id}@{revision or constants.DEFAULT_REVISION}"
    if constants.is_offline_mode():
        raise CheckpointError(
            f"{label}: offline mode (HF_HUB_OFFLINE) refuses the network",
            [Issue("cannot reach the Hub offline", hint="unset HF_HUB_OFFLINE, or read the repo from the local cache")],
        )
    try:
        meta = HfApi(endpoint=endpoint).get_safetensors_metadata(repo_id, revision=revision)
    except _HUB_FAILURES as exc:
        raise CheckpointError(
            f"{label}: {_describe(exc)}", [Issue(str(exc).strip(), file=label, hint=_hint(exc))]
        ) from None
    headers = {
        file: {
            name: {"dtype": t.dtype, "shape": t.shape, "data_offsets": list(t.data_offsets)}
            for name, t in fm.tensors.items()
        }
        for file, fm in sorted(meta.files_metadata.items())
    }
    return headers, (dict(meta.weight_map) if meta.sharded else None)


def _describe(exc: Exception) -> str:
    kinds: list[tuple[type, str]] = [
        (hf_errors.RepositoryNotFoundError, "repository not found (or private without a token)"),
        (hf_errors.RevisionNotFoundError, "revision not found"),
        (hf_errors.GatedRepoError, "gated repository: access not granted"),
        (
            hf_errors.NotASafetensorsRepoError,
            "no model.safetensors or model.safetensors.index.json at this revision, or no such repo",
        ),
        (hf_errors.SafetensorsParsingError, "a safetensors header could not be parsed"),
        (hf_errors.OfflineModeIsEnabled, "offline mode refuses the network"),
        (hf_errors.HfHubHTTPError, "the Hub answered with an error"),
    ]
    for kind, text in kinds:
        if isinstance(exc, kind):
            return text
    return f"cannot read the repo from the Hub ({type(exc).__name__})"


def _hint(exc: Any) -> str | None:
    if isinstance(exc, hf_errors.RepositoryNotFoundError | hf_errors.GatedRepoError):
        return "check the repo id, and log in (`hf auth login`) for private or gated repos"
    if isinstance(
        exc, hf_errors.HfHubHTTPError | hf_errors.SafetensorsParsingError | hf_errors.NotASafetensorsRepoError
    ):
        return None
    return "check the network and the endpoint (HF_ENDPOINT); offline, read the repo from the local cache"
