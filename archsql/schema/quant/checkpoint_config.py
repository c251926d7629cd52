"""What a checkpoint's own quantization config says: ``config.quantization_config`` or a
ModelOpt ``hf_quant_config.json``, the scheme it selects, and the config's storage dtype."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from archsql.dtypes import TORCH_DTYPES
from archsql.errors import Issue, SpecError
from archsql.schema.checks import type_name
from archsql.schema.quant.context import Rule
from archsql.schema.quant.schemes import FromConfig, QuantScheme, glob_ok


def config_path_value(doc: Any, path: str) -> tuple[bool, Any]:
    """(present, value) of a dotted path (list items by index) in a JSON document."""
    value = doc
    for part in str(path).split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def quant_document(config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None) -> tuple[dict | None, str]:
    """The checkpoint's quantization description and where it came from: a ModelOpt
    ``hf_quant_config.json`` (its ``quantization`` object, quant_method 'modelopt') wins over
    ``config.quantization_config``; a config without quant_method from the ModelOpt producer
    is read as quant_method 'modelopt'."""
    if hf_quant_config is not None and isinstance(hf_quant_config.get("quantization"), Mapping):
        doc = dict(hf_quant_config["quantization"])
        doc.setdefault("quant_method", "modelopt")
        return doc, "hf_quant_config.json"
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping):
        return None, ""
    doc = dict(qc)
    producer = doc.get("producer")
    if "quant_method" not in doc and isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        doc["quant_method"] = "modelopt"
    return doc, "config.json quantization_config"


def _matches(entry: FromConfig, doc: Mapping[str, Any]) -> bool:
    for path, want in entry.when.items():
        present, value = config_path_value(doc, path)
        accepted = want if isinstance(want, list) else [want]
        if not present or not any(value == a and type(value) is type(a) for a in accepted):
            return False
    return all(config_path_value(doc, p)[0] for p in entry.requires)


def rules_from_config(
    doc: Mapping[str, Any], source: str, schemes: Mapping[str, QuantScheme], file: str
) -> tuple[Rule | None, list[str], list[Issue]]:
    """The scheme a quantization document selects (the first matching entry of each scheme;
    two schemes matching is ambiguous), its params, and the module patterns it keeps
    unquantized."""
    hits = []
    for scheme in schemes.values():
        entry = next((e for e in scheme.from_config if _matches(e, doc)), None)
        if entry is not None:
            hits.append((scheme, entry))
    method = doc.get("quant_method", doc.get("quant_algo"))
    if not hits:
        known = sorted({str(e.when) for s in schemes.values() for e in s.from_config})
        return (
            None,
            [],
            [
                Issue(
                    f"the checkpoint's quantization ({source}: quant_method {method!r}) matches no quant scheme",
                    file=file,
                    hint="add a scheme YAML with a from_config entry under archsql/specs/quant/, or set "
                    f"quant_context.from_config: false and write the rules; known: {'; '.join(known[:6])}",
                )
            ],
        )
    if len(hits) > 1:
        names = ", ".join(s.name for s, _ in hits)
        return (
            None,
            [],
            [
                Issue(
                    f"the checkpoint's quantization ({source}) matches several schemes: {names}",
                    file=file,
                    hint="make the schemes' from_config conditions exclusive",
                )
            ],
        )
    scheme, entry = hits[0]
    params: dict[str, Any] = {}
    issues: list[Issue] = []
    for name, ref in entry.params.items():
        if isinstance(ref, int) and not isinstance(ref, bool):
            params[name] = ref
            continue
        present, value = config_path_value(doc, ref)
        if not present:
            issues.append(Issue(f"{source}: '{ref}' (scheme {scheme.name} param {name}) is missing", file=file))
        else:
            params[name] = value
    ignore: list[str] = []
    for path in entry.ignore:
        present, value = config_path_value(doc, path)
        if present and value is not None:
            if glob_ok(value):
                ignore.extend(value)
            else:
                issues.append(
                    Issue(f"{source}: '{path}' must be a list of module names", file=file, got=type_name(value))
                )
    label = f"default (from {source})"
    return Rule(scheme.name, params, None, label, None), ignore, issues


def config_dtype(config: Mapping[str, Any]) -> str | None:
    """The checkpoint's dtype: ``torch_dtype`` (``dtype`` in transformers >= 4.56), else the
    language model's under ``text_config`` (multimodal configs)."""
    for cfg in (config, config.get("text_config")):
        if isinstance(cfg, Mapping):
            value = cfg.get("torch_dtype", cfg.get("dtype"))
            if value is not None:
                return TORCH_DTYPES.get(str(value))
    return None


def read_hf_quant_config(config_file: Path) -> dict | None:
    """``hf_quant_config/<config file name>`` next to the config snapshot, when there is one."""
    path = config_file.parent / "hf_quant_config" / config_file.name
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(issues=[Issue(f"cannot read hf_quant_config.json: {exc}", file=str(path))]) from None
