"""Checkpoint-name canonicalisation: multimodal wrapper prefixes
(``archsql/specs/checkpoint_prefixes.yaml``) normalized to their canonical form."""

from __future__ import annotations

from functools import cache

from archsql.errors import SpecError
from archsql.schema.checks import Collector
from archsql.schema.quant.schemes import SPECS_DIR
from archsql.schema.yamlsrc import load_yaml

PREFIXES_FILE = SPECS_DIR / "checkpoint_prefixes.yaml"


@cache
def checkpoint_prefixes() -> tuple[tuple[str, str, str], ...]:
    """(prefix, canonical, description), longest prefix first (``checkpoint_prefixes.yaml``)."""
    data = load_yaml(PREFIXES_FILE)
    col = Collector(str(PREFIXES_FILE))
    out = []
    if col.keys(data, "$", data.keys() if isinstance(data, dict) else (), what="prefix"):
        for prefix, entry in data.items():
            p = f"$[{prefix!r}]"
            if col.keys(entry, p, ("canonical", "doc"), ("canonical",), at=(data, prefix)):
                canonical = entry.get("canonical")
                if not (
                    isinstance(prefix, str)
                    and isinstance(canonical, str)
                    and prefix.endswith(".")
                    and canonical.endswith(".")
                ):
                    col.add(
                        data,
                        prefix,
                        p,
                        "a prefix and its canonical form end with '.'",
                        got=f"{prefix!r} → {canonical!r}",
                    )
                    continue
                out.append((prefix, canonical, " ".join(str(entry.get("doc", "")).split())))
    if col.issues:
        raise SpecError(issues=col.issues)
    return tuple(sorted(out, key=lambda r: -len(r[0])))


def canonical_name(name: str) -> str:
    """A checkpoint-style name with its (longest) multimodal wrapper prefix normalized."""
    for prefix, canonical, _ in checkpoint_prefixes():
        if name.startswith(prefix):
            return canonical + name[len(prefix) :]
    return name
