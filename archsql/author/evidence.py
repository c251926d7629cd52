"""Review with checked evidence: every claim a reviewer (agent or person) makes about a spec
carries machine-checkable evidence, and the worker classifies it against the run's own facts
bundle — ``verified``, ``contradicted`` or ``unverified`` (the facts cannot say, or the claim
cannot be read).  Only verified claims may trigger a fix.

Claim forms (one per line):

- ``cfg:KEY=VALUE`` — a config.json value; ``KEY`` dotted for nested keys
  (``text_config.sliding_window``); ``VALUE`` read as JSON when it parses (``4096``, ``true``,
  ``null``, ``[1, 2]``), else as a string.
- ``ckpt:TENSOR [d0, d1, …]`` — a checkpoint tensor and its shape (the facts' tensor inventory
  is the whole checkpoint, so a tensor it does not hold is contradicted).
- ``count:PREFIX=N`` — the number of checkpoint tensors whose name starts with ``PREFIX``.
- ``src:FILE:SYMBOL`` — the text ``SYMBOL`` appears in the modeling source file ``FILE`` of the
  facts (whitespace runs match one space).

A review (:func:`verify_review`) is claims and defects, one per line; a defect is
``defect: WHAT :: CLAIM :: CLAIM …`` — verified when every claim of its evidence is,
contradicted when one is, else unverified (no evidence is unverified).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from archsql.author.facts import Facts

STATUSES = ("verified", "contradicted", "unverified")
_MISSING = object()


@dataclass(frozen=True)
class ClaimResult:
    claim: str
    kind: str  # cfg | ckpt | count | src | ?
    status: str  # verified | contradicted | unverified
    evidence: str  # what the facts hold, or why they cannot say


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _lookup(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _cfg(body: str, facts: Facts) -> tuple[str, str]:
    key, sep, raw = body.partition("=")
    key = key.strip()
    if not sep or not key:
        return "unverified", "cannot read the claim: write cfg:KEY=VALUE"
    found = _lookup(facts.config, key)
    if found is _MISSING:
        return "unverified", f"config.json has no key '{key}'"
    claimed = _value(raw.strip())
    if found == claimed and type(found) is type(claimed):
        return "verified", f"config.json {key} = {json.dumps(found)}"
    return "contradicted", f"config.json {key} = {json.dumps(found)}"


_SHAPE = re.compile(r"^(\S+)\s*\[([\d,\s]*)\]$")


def _ckpt(body: str, facts: Facts) -> tuple[str, str]:
    m = _SHAPE.match(body.strip())
    if not m:
        return "unverified", "cannot read the claim: write ckpt:TENSOR [d0, d1, ...]"
    if facts.tensors is None:
        return "unverified", "the facts hold no tensor inventory"
    name = m.group(1)
    claimed = [int(d) for d in m.group(2).split(",") if d.strip()]
    names = facts.tensors.column("name").to_pylist()
    if name not in names:
        return "contradicted", f"the checkpoint has no tensor '{name}'"
    shape = facts.tensors.column("shape")[names.index(name)].as_py()
    status = "verified" if list(shape) == claimed else "contradicted"
    return status, f"{name} {list(shape)}"


def _count(body: str, facts: Facts) -> tuple[str, str]:
    prefix, sep, raw = body.partition("=")
    if not sep or not raw.strip().isdigit():
        return "unverified", "cannot read the claim: write count:PREFIX=N"
    if facts.tensors is None:
        return "unverified", "the facts hold no tensor inventory"
    n = sum(1 for name in facts.tensors.column("name").to_pylist() if name.startswith(prefix.strip()))
    return ("verified" if n == int(raw) else "contradicted"), f"{n} tensors start with '{prefix.strip()}'"


def _src(body: str, facts: Facts) -> tuple[str, str]:
    file, sep, symbol = body.partition(":")
    if not sep or not file.strip() or not symbol.strip():
        return "unverified", "cannot read the claim: write src:FILE:SYMBOL"
    folder = facts.source_dir
    path = folder / file.strip().rsplit("/", 1)[-1] if folder else None
    if path is None or not path.is_file():
        return "unverified", f"the facts hold no modeling source '{file.strip()}'"
    flat = " ".join(path.read_text(encoding="utf-8", errors="replace").split())
    wanted = " ".join(symbol.split())
    if wanted in flat:
        return "verified", f"found in {path.name}"
    return "contradicted", f"not in {path.name}"


_KINDS = {"cfg": _cfg, "ckpt": _ckpt, "count": _count, "src": _src}


def verify(claims: list[str], facts: Facts) -> list[ClaimResult]:
    """Classify each claim against ``facts`` (module doc)."""
    out = []
    for claim in claims:
        kind, sep, body = claim.strip().partition(":")
        check = _KINDS.get(kind.strip()) if sep else None
        if check is None:
            out.append(ClaimResult(claim, "?", "unverified", "unknown claim form: use cfg:, ckpt:, count: or src:"))
            continue
        status, evidence = check(body, facts)
        out.append(ClaimResult(claim, kind.strip(), status, evidence))
    return out


def verify_review(lines: list[str], facts: Facts) -> list[ClaimResult]:
    """Claims and ``defect: WHAT :: CLAIM :: …`` lines (module doc), each classified."""
    out = []
    for line in lines:
        head, sep, rest = line.strip().partition(":")
        if not (sep and head.strip() == "defect"):
            out += verify([line], facts)
            continue
        what, *claims = [part.strip() for part in rest.split("::")]
        checked = verify([c for c in claims if c], facts)
        statuses = {r.status for r in checked}
        if "contradicted" in statuses:
            status = "contradicted"
        elif checked and statuses == {"verified"}:
            status = "verified"
        else:
            status = "unverified"
        evidence = "; ".join(f"{r.claim} → {r.status} ({r.evidence})" for r in checked) or "no evidence given"
        out.append(ClaimResult(f"defect: {what}", "defect", status, evidence))
    return out
