"""The author's prompt, assembled from data only: the op registry (each primitive with its
shape rule and doc), the component library manifest (role, dims, doc), the spec schema (the
model keys and the dims table), 3–5 verified catalog specs chosen by similarity to the facts'
config, the guards and their codes, and the facts themselves.

Deterministic: every list sorted, no clock, no paths of the machine (the same facts and
library give the same bytes), so a prompt can be diffed and cached.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from archsql.author.facts import Facts
from archsql.author.guards import CODES

N_EXAMPLES = 4  # verified example specs in a prompt (3–5)
# config keys too common to say anything about an architecture
_COMMON = {"architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "vocab_size"}


def op_registry() -> list[tuple[str, str, str]]:
    """(op name, shape rule kind, first line of its doc) of every primitive, by name."""
    import archsql.evaluator  # noqa: F401  (registers the primitives)
    from archsql.schema.ops import known_ops

    out = []
    for name, cls in sorted(known_ops().items()):
        doc = (cls.__doc__ or "").strip().splitlines()
        out.append((name, str(getattr(cls, "shape_kind", "") or ""), doc[0] if doc else ""))
    return out


def _yaml(path: Path) -> dict:
    """A YAML file's mapping, read by the C loader when there is one (no locations needed:
    these files are the library's own, validated where they are used)."""
    import yaml

    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return data if isinstance(data, dict) else {}


def component_manifest(library) -> list[dict]:
    """Name, role, doc and the dims each library component uses, read from its YAML."""
    out = []
    for name, path in sorted(library.component_files.items()):
        data = _yaml(path)
        text = path.read_text(encoding="utf-8")
        dims = sorted(d for d in library.dims if re.search(rf"\b{re.escape(d)}\b", text))
        doc = " ".join(str(data.get("doc") or "").split())
        out.append({"component": name, "role": str(data.get("role", "")), "dims": dims, "doc": doc[:300]})
    return out


def _config_of(library, name: str) -> dict:
    """The config.json a catalog model reads (``config:``, inherited through ``extends:``)."""
    from types import SimpleNamespace

    from archsql.evaluator.bind import config_path

    path, seen = library.model_files.get(name), set()
    while path is not None and path not in seen:
        seen.add(path)
        data = _yaml(path)
        if isinstance(data.get("config"), str):
            where = config_path(SimpleNamespace(config_file=data["config"], file=path), library.configs_dir)
            try:
                return json.loads(where.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
        path = library.model_files.get(str(data.get("extends")))
    return {}


def _keys(config: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in config.items():
        out.add(prefix + k)
        if isinstance(v, dict) and k.endswith("_config"):
            out |= _keys(v, f"{prefix}{k}.")
    return out - _COMMON


def similar_models(config: dict, library, n: int = N_EXAMPLES) -> list[tuple[str, float]]:
    """The ``n`` catalog models whose configs are closest to ``config``: the Jaccard
    similarity of their config key sets, plus 1 for the same ``model_type`` and 1 for a shared
    ``architectures`` class; ties by name.  A catalog model with this very config is left out."""
    mine = _keys(config)
    arch = set(config.get("architectures") or [])
    scored = []
    for name in library.catalog():
        other = _config_of(library, name)
        if other == config:  # the model itself (already in the catalog) is no example
            continue
        keys = _keys(other)
        score = len(mine & keys) / max(1, len(mine | keys))
        score += 1.0 if other.get("model_type") and other.get("model_type") == config.get("model_type") else 0.0
        score += 1.0 if arch & set(other.get("architectures") or []) else 0.0
        scored.append((name, round(score, 4)))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored[:n]


def _extends_chain(library, name: str) -> list[str]:
    """``name`` and the catalog models it extends, nearest first."""
    chain: list[str] = []
    while name in library.model_files and name not in chain:
        chain.append(name)
        name = str(_yaml(library.model_files[name]).get("extends"))
    return chain


def tensor_summary(facts: Facts, limit: int = 60) -> list[str]:
    """The facts' tensors by name pattern (layer and expert indices as ``*``): count, dtype, shape."""
    if facts.tensors is None:
        return []
    groups: Counter = Counter()
    shapes: dict[str, str] = {}
    for name, dtype, shape in zip(
        facts.tensors.column("name").to_pylist(),
        facts.tensors.column("dtype").to_pylist(),
        facts.tensors.column("shape").to_pylist(),
        strict=True,
    ):
        pattern = re.sub(r"(?<=\.)\d+(?=\.)", "*", name)
        key = f"{pattern} {dtype} {list(shape)}"
        groups[key] += 1
        shapes[key] = pattern
    lines = [f"{count:>5} × {key}" for key, count in sorted(groups.items(), key=lambda kv: (shapes[kv[0]], kv[0]))]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more patterns"]
    return lines


def assemble(facts: Facts, library=None, *, n_examples: int = N_EXAMPLES) -> str:
    """The full prompt for ``facts`` (markdown)."""
    from archsql.schema.spec import MODEL_KEYS
    from archsql.specs import default_library

    library = library or default_library()
    parts = [
        "# Task: write an archsql model spec",
        "Write ONE model spec YAML to the draft file named in the command (draft.yaml in the working "
        "folder). It must read `config: config.json` (the copy beside the draft). The worker checks it with "
        "the guards below and sends back every error with its code and location; fix them and write the "
        "file again. Bind every dim from `config.<key>`; list a config key the spec deliberately does not "
        "read under `config_unused:` with the reason. A part of the checkpoint the spec does not model "
        "(a vision tower, an audio encoder) goes under `omitted: { NAME: { tensors: [glob, ...], config: "
        "[key, ...], reason: TEXT } }`: the params and checkpoint guards then compare the rest. Never "
        "hard-code a number the config gives.",
        "## Guards and error codes",
        *[f"- {code} [{guard}] {what}" for code, (guard, what) in sorted(CODES.items())],
        "## Spec schema: model keys",
        ", ".join(MODEL_KEYS),
        "## Dims table (archsql/specs/dims.yaml): dim: kind",
        *[f"- {d}: {spec.get('kind')}" for d, spec in sorted(library.dims.items())],
        "## Roles",
        ", ".join(sorted(library.roles)),
        "## Primitives (op: shape rule — doc)",
        *[f"- {name}: {kind} — {doc}" for name, kind, doc in op_registry()],
        "## Components (component [role] dims — doc)",
        *[f"- {c['component']} [{c['role']}] {', '.join(c['dims'])} — {c['doc']}" for c in component_manifest(library)],
        "## Verified example specs (most similar configs first)",
    ]
    shown: set[str] = set()
    for name, score in similar_models(facts.config, library, n_examples):
        parts += [f"### {name} (similarity {score})"]
        for member in _extends_chain(library, name):  # the spec, then the parents it extends
            if member in shown:
                parts += [f"(extends {member}, shown above)"]
                break
            shown.add(member)
            text = library.model_files[member].read_text(encoding="utf-8").rstrip()
            parts += [*([f"{member}.yaml (extended):"] if member != name else []), "```yaml", text, "```"]
    parts += [
        "## Facts: config.json",
        "```json",
        json.dumps(facts.config, indent=1, sort_keys=True),
        "```",
    ]
    for name, data in sorted(facts.extra.items()):
        parts += [f"## Facts: {name}", "```json", json.dumps(data, indent=1, sort_keys=True), "```"]
    tensors = tensor_summary(facts)
    if tensors:
        how = (facts.provenance.get("tensors") or {}).get("how", "")
        parts += [f"## Facts: checkpoint tensors ({how})", "```", *tensors, "```"]
    if facts.inventory is not None:
        parts += [
            "## Facts: transformers module tree (meta device)",
            "```",
            str(facts.inventory.get("module_tree", "")),
            "```",
        ]
    if facts.source_dir is not None:
        parts += [
            "## Facts: modeling source files",
            *sorted(f"- source/{p.name}" for p in facts.source_dir.glob("*.py")),
        ]
    return "\n".join(parts) + "\n"


def write(facts: Facts, path: str | Path, library=None) -> Path:
    path = Path(path)
    path.write_text(assemble(facts, library), encoding="utf-8")
    return path
