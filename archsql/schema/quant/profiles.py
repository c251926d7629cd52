"""Precision profiles (``archsql/specs/quant/profiles/*.yaml``): a quant_context that
replaces the keys it gives — "deploy in NVFP4"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from archsql.errors import Issue, SpecError, unknown_name
from archsql.schema.checks import Collector, type_name
from archsql.schema.quant.context import QuantContext, parse_quant_context
from archsql.schema.quant.schemes import QUANT_DIR, QuantScheme
from archsql.schema.yamlsrc import load_yaml

PROFILES_DIR = QUANT_DIR / "profiles"
PROFILE_KEYS = ("profile", "doc", "quant_context")


@dataclass(frozen=True)
class Profile:
    name: str
    file: str
    doc: str
    context: QuantContext


def load_profile(name: str, schemes: Mapping[str, QuantScheme], roles: Mapping[str, Any]) -> Profile:
    files = {p.stem: p for p in sorted(PROFILES_DIR.glob("*.yaml"))}
    if name not in files:
        message, hint = unknown_name("precision profile", name, files)
        raise SpecError(issues=[Issue(message, hint=hint + " (profiles live in archsql/specs/quant/profiles/)")])
    path = files[name]
    data = load_yaml(path)
    col = Collector(str(path))
    qc = QuantContext()
    if col.keys(data, "$", PROFILE_KEYS, PROFILE_KEYS):
        if data.get("profile") != path.stem:
            col.add(
                data,
                "profile",
                "$.profile",
                "profile name must equal the file name",
                expected=path.stem,
                got=type_name(data.get("profile")),
                value=True,
            )
        qc = parse_quant_context(data.get("quant_context"), col, schemes, roles)
        if "from_config" in qc.given:
            col.add(
                data["quant_context"],
                "from_config",
                "$.quant_context.from_config",
                "a profile never reads the checkpoint's config (it describes a deployment)",
            )
    if col.issues:
        raise SpecError(issues=col.issues)
    return Profile(name, str(path), " ".join(str(data.get("doc", "")).split()), qc)


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
