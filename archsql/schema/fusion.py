"""Fusion rules as data: what a serving framework launches for a pattern of primitives.

A rule file (``archsql/specs/fusion/<framework>-<version>.yaml``) names a framework and the
versions it describes, then rules, each a pattern over the evaluated op graph, the
conditions under which the framework fuses it, the kernel it becomes and the place in the
framework's source the rule was read from (a rule without a source is an error).

Patterns (both over ``base_edges`` / ``base_nodes`` of one model and phase):

* ``chain: [A, B]`` — a node matching A whose output B reads on ``B.port``; A's output is the
  group's internal tensor (written and re-read when unfused; never written when A has no
  other reader).
* ``siblings: S`` — two or more nodes matching S that read the same tensor on ``S.port``
  (merged projections): the shared input is read once.

A node pattern: ``op`` (required), ``role`` and ``port`` (optional).  Conditions (``when``):
``tp_min`` (the deployment's tp at least this), ``phase`` (prefill | decode), ``flag`` (a
launch flag that must be enabled; the deployment tables have no flags yet, so such a rule
never fires and says so).  The rows become the ``fusion_rules`` reference table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from archsql.errors import SpecError

if TYPE_CHECKING:
    from archsql.schema.checks import Collector

FILE_KEYS = ("framework", "versions", "rules")
RULE_KEYS = ("name", "doc", "pattern", "kernel", "when", "source")
NODE_KEYS = ("op", "role", "port")
WHEN_KEYS = ("tp_min", "phase", "flag")
SOURCE_KEYS = ("file", "function")
PHASES = ("prefill", "decode")

FUSION_RULES_SCHEMA = pa.schema(
    [
        ("framework", pa.string()),
        ("version", pa.string()),  # the framework version the rule file was read from (its file name)
        ("versions", pa.string()),  # the version range the rule file describes, e.g. ">=0.11"
        ("rule", pa.string()),
        ("priority", pa.int32()),  # the rule's place in its file: a node joins the first rule that takes it
        ("pattern", pa.string()),  # chain | siblings
        ("first_op", pa.string()),  # chain: A; siblings: S
        ("first_role", pa.string()),
        ("second_op", pa.string()),  # chain: B; siblings: null
        ("second_role", pa.string()),
        ("port", pa.int32()),  # chain: B's input port reading A; siblings: the shared input's port
        ("kernel", pa.string()),
        ("tp_min", pa.int64()),
        ("phase", pa.string()),
        ("flag", pa.string()),
        ("source_file", pa.string()),
        ("source_function", pa.string()),
        ("doc", pa.string()),
    ]
)


def _closed(col: Collector, obj: Any, path: str, allowed, required=(), what: str = "key") -> bool:
    """A mapping of known keys with every required one (problems recorded in ``col``)."""
    return col.keys(obj, path, allowed, required, what=what) and all(k in obj for k in required)


def _node(col: Collector, obj: Any, path: str) -> dict | None:
    if not _closed(col, obj, path, NODE_KEYS, ("op",), what="node pattern key"):
        return None
    for key, kind in (("op", str), ("role", str), ("port", int)):
        value = obj.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            col.add(obj, key, f"{path}.{key}", f"{key} must be a {kind.__name__}", got=repr(value), value=True)
            return None
    return dict(obj)


def _rule(col: Collector, rule: Any, path: str, file: tuple[str, str, str], priority: int) -> dict | None:
    if not _closed(col, rule, path, RULE_KEYS, ("name", "pattern", "kernel", "source"), what="rule key"):
        return None
    source = rule["source"]
    if not _closed(col, source, f"{path}.source", SOURCE_KEYS, SOURCE_KEYS, what="source key"):
        return None
    when = rule.get("when") or {}
    if not _closed(col, when, f"{path}.when", WHEN_KEYS, what="condition"):
        return None
    if when.get("phase") is not None and when["phase"] not in PHASES:
        col.add(
            when, "phase", f"{path}.when.phase", "unknown phase", expected=" | ".join(PHASES), got=str(when["phase"])
        )
        return None
    pattern = rule["pattern"]
    if not isinstance(pattern, dict) or len(pattern) != 1 or next(iter(pattern)) not in ("chain", "siblings"):
        col.add(rule, "pattern", f"{path}.pattern", "a pattern is one of chain: [A, B] or siblings: S")
        return None
    kind, body = next(iter(pattern.items()))
    if kind == "chain":
        if not isinstance(body, list) or len(body) != 2:
            col.add(pattern, "chain", f"{path}.pattern.chain", "a chain has two node patterns [A, B]")
            return None
        first, second = _node(col, body[0], f"{path}.pattern.chain[0]"), _node(col, body[1], f"{path}.pattern.chain[1]")
    else:
        first, second = _node(col, body, f"{path}.pattern.siblings"), {}
    if first is None or second is None:
        return None
    framework, version, versions = file
    return {
        "framework": framework,
        "version": version,
        "versions": versions,
        "rule": rule["name"],
        "priority": priority,
        "pattern": kind,
        "first_op": first["op"],
        "first_role": first.get("role"),
        "second_op": second.get("op"),
        "second_role": second.get("role"),
        "port": (second if kind == "chain" else first).get("port", 0),
        "kernel": rule["kernel"],
        "tp_min": when.get("tp_min"),
        "phase": when.get("phase"),
        "flag": when.get("flag"),
        "source_file": source["file"],
        "source_function": source["function"],
        "doc": rule.get("doc", ""),
    }


def parse_rule_file(path: Path) -> list[dict]:
    """The rows of one rule file (named ``<framework>-<version>.yaml``); every problem of the
    file raised at once, located."""
    from archsql.schema.checks import Collector  # YAML loads when rules are read, not with the schema
    from archsql.schema.yamlsrc import load_yaml

    data = load_yaml(path)
    col = Collector(str(path))
    rows: list[dict] = []
    if _closed(col, data, "$", FILE_KEYS, FILE_KEYS, what="rule file key"):
        framework, _, version = path.stem.partition("-")
        if framework != data["framework"] or not version:
            col.add(
                data,
                "framework",
                "$.framework",
                "a rule file is named <framework>-<version>.yaml after the framework it describes",
                expected=f"{data['framework']}-<version>.yaml",
                got=path.name,
                value=True,
            )
        file = (str(data["framework"]), version, str(data["versions"]))
        names: set[str] = set()
        for i, rule in enumerate(data["rules"] or []):
            row = _rule(col, rule, f"$.rules[{i}]", file, i)
            if row is None:
                continue
            if row["rule"] in names:
                col.add(rule, "name", f"$.rules[{i}].name", "rule name used twice in this file", got=row["rule"])
            names.add(row["rule"])
            rows.append(row)
    if col.issues:
        raise SpecError(issues=col.issues)
    return rows


def fusion_rules_table(directory: Path) -> pa.Table:
    """The ``fusion_rules`` reference table: every rule of every file under ``directory``."""
    rows = [row for path in sorted(directory.glob("*.yaml")) for row in parse_rule_file(path)]
    return pa.Table.from_pylist(rows, schema=FUSION_RULES_SCHEMA)
