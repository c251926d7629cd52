"""Fusion rules as data: what a serving framework launches for a pattern of primitives.

A rule file (``archsql/specs/fusion/<framework>-<version>.yaml``) names a framework and the
versions it describes, then rules, each a pattern over the evaluated op graph, the
conditions under which the framework fuses it, the kernel it becomes and the place in the
framework's source the rule was read from (a rule without a source is an error).

Patterns (both over ``base_edges`` / ``base_nodes`` of one model and phase):

* ``chain: [A, B, ...]`` — a node matching A whose output B reads on ``B.port``, whose output
  C reads on ``C.port``...; each link's tensor is internal to the kernel (written and re-read
  when unfused; never written when its producer has no other reader).
* ``siblings: S`` — two or more nodes matching S that read the same tensor on ``S.port``
  (merged projections): the shared input is read once.

A node pattern: ``op`` (required: one op or a list of ops), ``role`` (one role or a list: the
DeepSeek shared expert has role ``ffn_moe``, a dense MLP ``ffn``) and ``port``.  A chain has
two or more node patterns; ``port`` of node i is the input port reading node i-1 (a node
pattern may name a collective, ``all_reduce``, inserted on its consumer's port).
``region: [FROM, TO]`` matches a node FROM and every node its output reaches inside its
component instance (its uid up to the last '.') up to nodes matching TO, inclusive: the
routed experts' dispatch → w13 GEMM → SiLU-and-mul → w2 GEMM → combine of one fused-MoE call.
A rule with ``call: true`` is such a framework call of several kernels: its group is measured as
one (``op_kind``, the corpus's whole-MoE rows) but fuses nothing — its kernels are the other
rules' — so it neither takes members from other rules nor is taken.
``node: N`` matches one node and only names the kernel it launches (the MLA decode kernel,
the DSA indexer's logits kernel): nothing is fused, the launch list says which kernel runs.

Conditions (``when``), each failing condition kept as a reason a user can query
(``fusion_hits.reason``): ``tp_min`` (the deployment's tp at least this), ``phase`` (prefill |
decode), ``flag`` (a launch flag, ``{name, default}`` or a name with default off: the
deployment's ``deployment_flags`` row, else the default), ``dim_in`` (``{dim, values}``: the
model's dim in a set, e.g. the head_dim a kernel is compiled for), ``act_dtype`` (the
deployment's activation dtype in a list), ``gpu_family`` (the GPU's architecture family,
``gpu_architectures``, in a list), ``model_roles`` (the model has nodes of each of these
roles: a framework fusing only in its MoE model class).  The rows become the
``fusion_rules`` reference table.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from archsql.errors import SpecError

if TYPE_CHECKING:
    from archsql.schema.checks import Collector

FILE_KEYS = ("framework", "versions", "rules")
RULE_KEYS = ("name", "doc", "pattern", "kernel", "op_kind", "call", "when", "source")
PATTERNS = ("chain", "siblings", "node", "region")
NODE_KEYS = ("op", "role", "port")
WHEN_KEYS = ("tp_min", "phase", "flag", "dim_in", "act_dtype", "gpu_family", "model_roles")
FLAG_KEYS = ("name", "default")
DIM_KEYS = ("dim", "values")
SOURCE_KEYS = ("file", "function")
PHASES = ("prefill", "decode")

STEP_TYPE = pa.struct([("ops", pa.list_(pa.string())), ("roles", pa.list_(pa.string())), ("port", pa.int32())])

FUSION_RULES_SCHEMA = pa.schema(
    [
        ("framework", pa.string()),
        ("version", pa.string()),  # the framework version the rule file was read from (its file name)
        ("versions", pa.string()),  # the version range the rule file describes, e.g. ">=0.11"
        ("rule", pa.string()),
        ("priority", pa.int32()),  # the rule's place in its file: a node joins the first rule that takes it
        ("pattern", pa.string()),  # chain | siblings | node
        # chain: the nodes in order, each port the input reading the previous node; siblings:
        # one step, its port the shared input's; node: one step (port unused); region: [from,
        # to].  roles null: any
        ("steps", pa.list_(STEP_TYPE)),
        ("kernel", pa.string()),
        # the measured op kind of the kernel (the corpus registry's: moe, mla, gemm, ...) when the
        # group is measured as one kernel; null: its anchor's
        ("op_kind", pa.string()),
        # a call: one framework call of several kernels (a fused-MoE call: w13 GEMM, SiLU-and-mul,
        # w2 GEMM, sum) measured as one; it fuses nothing and takes no member from another rule
        ("call", pa.bool_()),
        ("tp_min", pa.int64()),
        ("phase", pa.string()),
        ("flag", pa.string()),
        ("flag_default", pa.bool_()),  # the flag's value when a deployment does not set it
        ("dim", pa.string()),  # dim_in: the model dim tested
        ("dim_values", pa.list_(pa.int64())),  # dim_in: the values the kernel supports
        ("act_dtypes", pa.list_(pa.string())),
        ("gpu_families", pa.list_(pa.string())),
        ("model_roles", pa.list_(pa.string())),
        ("source_file", pa.string()),
        ("source_function", pa.string()),
        ("doc", pa.string()),
    ]
)


def _closed(col: Collector, obj: Any, path: str, allowed, required=(), what: str = "key") -> bool:
    """A mapping of known keys with every required one (problems recorded in ``col``)."""
    return col.keys(obj, path, allowed, required, what=what) and all(k in obj for k in required)


def _names(col: Collector, obj: Any, key: str, path: str, kind: type = str) -> list | None:
    """``obj[key]`` as a list of ``kind`` (one value or a list of them); None when absent;
    False (recorded) when malformed."""
    value = obj.get(key)
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    if not values or any(not isinstance(v, kind) or isinstance(v, bool) for v in values):
        col.add(
            obj,
            key,
            f"{path}.{key}",
            f"{key} must be a {kind.__name__} or a non-empty list of them",
            got=repr(value),
            value=True,
        )
        return False  # type: ignore[return-value]
    return list(values)


def _node(col: Collector, obj: Any, path: str) -> dict | None:
    if not _closed(col, obj, path, NODE_KEYS, ("op",), what="node pattern key"):
        return None
    ops, roles = _names(col, obj, "op", path), _names(col, obj, "role", path)
    port = obj.get("port", 0)
    if not isinstance(port, int) or isinstance(port, bool) or port < 0:
        col.add(obj, "port", f"{path}.port", "port must be an input index (0, 1, ...)", got=repr(port), value=True)
        return None
    if ops is False or roles is False:
        return None
    return {"ops": ops, "roles": roles, "port": port}


def _when(col: Collector, when: Any, path: str) -> dict | None:
    if not _closed(col, when, path, WHEN_KEYS, what="condition"):
        return None
    out: dict[str, Any] = {"tp_min": when.get("tp_min"), "phase": when.get("phase")}
    ok = True
    if out["tp_min"] is not None and (not isinstance(out["tp_min"], int) or isinstance(out["tp_min"], bool)):
        col.add(when, "tp_min", f"{path}.tp_min", "tp_min must be an integer", got=repr(out["tp_min"]), value=True)
        ok = False
    if out["phase"] is not None and out["phase"] not in PHASES:
        col.add(when, "phase", f"{path}.phase", "unknown phase", expected=" | ".join(PHASES), got=str(out["phase"]))
        ok = False
    flag = when.get("flag")
    out["flag"], out["flag_default"] = None, None
    if isinstance(flag, str):
        out["flag"], out["flag_default"] = flag, False
    elif flag is not None:
        if _closed(col, flag, f"{path}.flag", FLAG_KEYS, ("name",), what="flag key"):
            default = flag.get("default", False)
            if not isinstance(flag["name"], str) or not isinstance(default, bool):
                col.add(flag, "name", f"{path}.flag", "a flag is {name: <launch flag>, default: true | false}")
                ok = False
            out["flag"], out["flag_default"] = flag["name"], default
        else:
            ok = False
    dim_in = when.get("dim_in")
    out["dim"], out["dim_values"] = None, None
    if dim_in is not None:
        if _closed(col, dim_in, f"{path}.dim_in", DIM_KEYS, DIM_KEYS, what="dim_in key"):
            values = _names(col, dim_in, "values", f"{path}.dim_in", int)
            if not isinstance(dim_in["dim"], str) or not values:
                if values is not False:
                    col.add(dim_in, "dim", f"{path}.dim_in", "dim_in is {dim: <model dim>, values: [n, ...]}")
                ok = False
            else:
                out["dim"], out["dim_values"] = dim_in["dim"], values
        else:
            ok = False
    for key, column in (("act_dtype", "act_dtypes"), ("gpu_family", "gpu_families"), ("model_roles", "model_roles")):
        values = _names(col, when, key, path)
        ok = ok and values is not False
        out[column] = values or None
    return out if ok else None


def _rule(col: Collector, rule: Any, path: str, file: tuple[str, str, str], priority: int) -> dict | None:
    if not _closed(col, rule, path, RULE_KEYS, ("name", "pattern", "kernel", "source"), what="rule key"):
        return None
    source = rule["source"]
    if not _closed(col, source, f"{path}.source", SOURCE_KEYS, SOURCE_KEYS, what="source key"):
        return None
    when = _when(col, rule.get("when") or {}, f"{path}.when")
    if when is None:
        return None
    pattern = rule["pattern"]
    if not isinstance(pattern, dict) or len(pattern) != 1 or next(iter(pattern)) not in PATTERNS:
        col.add(
            rule,
            "pattern",
            f"{path}.pattern",
            "a pattern is one of chain: [A, B, ...], siblings: S, node: N or region: [FROM, TO]",
            hint="e.g. pattern: { chain: [ { op: silu }, { op: mul, port: 0 } ] }",
        )
        return None
    kind, body = next(iter(pattern.items()))
    if kind == "chain":
        if not isinstance(body, list) or len(body) < 2:
            col.add(pattern, "chain", f"{path}.pattern.chain", "a chain has two or more node patterns [A, B, ...]")
            return None
        steps = [_node(col, b, f"{path}.pattern.chain[{i}]") for i, b in enumerate(body)]
    elif kind == "region":
        if not isinstance(body, list) or len(body) != 2:
            col.add(pattern, "region", f"{path}.pattern.region", "a region has two node patterns [FROM, TO]")
            return None
        steps = [_node(col, b, f"{path}.pattern.region[{i}]") for i, b in enumerate(body)]
    else:
        steps = [_node(col, body, f"{path}.pattern.{kind}")]
    if any(s is None for s in steps):
        return None
    call = rule.get("call", False)
    if not isinstance(call, bool):
        col.add(rule, "call", f"{path}.call", "call must be true or false", got=repr(call), value=True)
        return None
    framework, version, versions = file
    return {
        "framework": framework,
        "version": version,
        "versions": versions,
        "rule": rule["name"],
        "priority": priority,
        "pattern": kind,
        "steps": steps,
        "kernel": rule["kernel"],
        "op_kind": rule.get("op_kind"),
        "call": call,
        **when,
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
    """The ``fusion_rules`` reference table: every rule of every file under ``directory``
    (parsed once per version of the files — name, modification time, size — in a process:
    every store write rewrites the table, and parsing the rule files costs ~60 ms)."""
    files = sorted(directory.glob("*.yaml"))
    return _rules_of(tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files))


@functools.lru_cache(maxsize=8)
def _rules_of(files: tuple[tuple[str, int, int], ...]) -> pa.Table:
    rows = [row for path, _, _ in files for row in parse_rule_file(Path(path))]
    return pa.Table.from_pylist(rows, schema=FUSION_RULES_SCHEMA)
