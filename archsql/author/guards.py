"""The guards of a draft spec against its facts bundle: each a class of check with its own
error codes, every error located (file:line $.path, or the checkpoint tensor, or the config
key) and saying how to write it right.

| guard | code | catches |
| --- | --- | --- |
| schema | A101 | the spec cannot be parsed, bound or evaluated (unknown names, bad fields, config keys missing) |
| schema | A102 | tensors that cannot be joined (the evaluator's shape errors) |
| schema | A103 | the draft reads another config.json than the facts' |
| structure | A201 | a schedule that does not cover every layer or every value a per-layer config list holds |
| structure | A202 | a dim bound and never used, or used and never bound |
| structure | A203 | sliding windows that disagree with the config (``layer_types``, ``sliding_window``) |
| structure | A204 | a node of the model graph whose output nothing reads, or a template no stack schedules |
| structure | A205 | an ``omitted:`` part whose tensor patterns cover a tensor the spec models |
| axioms | A701 | a windowed cache and the attention reading it disagree on the positions kept |
| axioms | A702 | a latent cache (kind ``latent``) with a head-count axis |
| axioms | A703 | a state cache (SSM, conv, recurrent) that grows with the context or is read in proportion to it; a cache whose tensor's runtime axes disagree with its growth law |
| axioms | A704 | more active expert copies than experts |
| coverage | A301 | a config key the spec does not read and does not list under ``config_unused:`` |
| params | A401 | total parameters of the modelled part differ from the meta inventory's |
| params | A402 | an ``omitted:`` part whose patterns match no tensor of the meta inventory |
| checkpoint | A501 | a checkpoint tensor no spec tensor claims |
| checkpoint | A502 | a spec tensor the checkpoint does not have |
| checkpoint | A503 | a stored dtype or packed element count that differs (quant scheme) |
| checkpoint | A504 | an element count that differs |
| checkpoint | A505 | same element count, different shape |
| checkpoint | A506 | byte totals differ (the final checksum) |
| checkpoint | A507 | a storage rule that matches nothing, or an unreadable checkpoint |
| checkpoint | A508 | an ``omitted:`` part whose patterns match no checkpoint tensor |

A spec's ``omitted:`` parts (a vision tower, an audio encoder it does not model) are taken out
of both sides before params and checkpoint compare, and reported apart (``GuardReport.omitted``:
tensors, parameters, bytes per part).
| source | A601 | a stream or cache ``src:`` anchor not found in the modeling source |

Schema, structure and coverage reuse the evaluator's own checks (:func:`archsql.evaluator.evaluate`
and its unread-config-key warnings); checkpoint reuses the reconciliation of ``archsql validate``
(:func:`archsql.publish_check.reconcile`, the store's ``checkpoint_reconciliation`` view);
source reuses :mod:`archsql.source_guard`; the axioms are queries (``axioms.yaml``) over the
evaluated tables in an in-memory DuckDB.  The checkpoint guard, the costly one (a scratch
store), runs last and only when every other guard passed (``full=True`` runs it anyway).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql.author.facts import Facts
from archsql.errors import ArchsqlError, ConfigError, EvaluationError, Issue, ShapeError, SpecError
from archsql.publish_check import part_indices

GUARDS = ("schema", "structure", "axioms", "coverage", "params", "checkpoint", "source")
CODES: dict[str, tuple[str, str]] = {
    "A101": ("schema", "the spec cannot be parsed, bound or evaluated"),
    "A102": ("schema", "tensors that cannot be joined"),
    "A103": ("schema", "the draft reads another config.json than the facts'"),
    "A201": ("structure", "a schedule does not cover every layer or every listed config value"),
    "A202": ("structure", "a dim bound and never used, or used and never bound"),
    "A203": ("structure", "sliding windows disagree with the config"),
    "A204": ("structure", "a dangling node or an unscheduled template"),
    "A205": ("structure", "an omitted part covers a tensor the spec models"),
    "A701": ("axioms", "a windowed cache and its reader disagree on the positions kept"),
    "A702": ("axioms", "a latent cache depends on a head count"),
    "A703": ("axioms", "a cache's growth law disagrees with its tensor (a state that depends on the context)"),
    "A704": ("axioms", "more experts active per token than exist"),
    "A301": ("coverage", "a config key neither read nor listed under config_unused"),
    "A401": ("params", "total parameters differ from the meta inventory"),
    "A402": ("params", "an omitted part matches no tensor of the meta inventory"),
    "A501": ("checkpoint", "a checkpoint tensor no spec tensor claims"),
    "A502": ("checkpoint", "a spec tensor the checkpoint does not have"),
    "A503": ("checkpoint", "stored dtype or packed element count differs"),
    "A504": ("checkpoint", "element count differs"),
    "A505": ("checkpoint", "same element count, different shape"),
    "A506": ("checkpoint", "byte totals differ"),
    "A507": ("checkpoint", "a storage rule matches nothing, or the checkpoint is unreadable"),
    "A508": ("checkpoint", "an omitted part matches no checkpoint tensor"),
    "A601": ("source", "a src: anchor is not found in the modeling source"),
}


@dataclass(frozen=True)
class GuardError:
    """One reason a draft does not pass, with its code (:data:`CODES`) and location."""

    code: str
    location: str
    message: str
    expected: str | None = None
    got: str | None = None
    hint: str | None = None
    kind: str | None = None  # what is wrong, where a check says it as data (checkpoint: publish_check.KINDS)

    @property
    def guard(self) -> str:
        return CODES[self.code][0]

    def render(self) -> str:
        text = f"{self.code} [{self.guard}] {self.location}: {self.message}"
        parts = [f"{k} {v}" for k, v in (("expected", self.expected), ("got", self.got)) if v is not None]
        if parts:
            text += f" ({', '.join(parts)})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"guard": self.guard, **asdict(self)}


@dataclass
class GuardReport:
    """Every guard's verdict on one draft: ``status`` per guard is ``passed``, ``failed`` or
    ``skipped: <why>``; ``errors`` in guard order."""

    status: dict[str, str] = field(default_factory=dict)
    errors: list[GuardError] = field(default_factory=list)
    # the parts the spec declares omitted, as the params and checkpoint guards counted them:
    # {part, reason, inventory_tensors, inventory_params, checkpoint_tensors, checkpoint_bytes}
    omitted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.errors and all(s == "passed" or s.startswith("not applicable") for s in self.status.values())

    def codes(self) -> list[str]:
        return [e.code for e in self.errors]

    def _set(self, guard: str, errors: list[GuardError]) -> None:
        self.errors += errors
        self.status[guard] = "failed" if errors else "passed"


def _loc(issue: Issue) -> str:
    loc = issue.location() if (issue.file or issue.line is not None) else "<spec>"
    return f"{loc} {issue.path}" if issue.path else loc


def _err(code: str, issue: Issue, kind: str | None = None) -> GuardError:
    return GuardError(code, _loc(issue), issue.message, issue.expected, issue.got, issue.hint, kind)


# The code of each evaluator issue tagged with its rule (archsql.errors.Issue.rule): the
# kind of problem, never its wording, chooses the code.
RULE_CODES: dict[str, str] = {
    "dim_unbound": "A202",
    "dim_unused": "A202",
    "template_unscheduled": "A204",
    "axiom:window_cache": "A701",
    "axiom:chunk_cache": "A701",
    "axiom:cache_axes": "A703",
}


def _spec_issue_code(issue: Issue, default: str = "A101") -> str:
    """Schedule issues (by their YAML path) are structure (A201); tagged issues by their rule
    (:data:`RULE_CODES`); the rest ``default`` (A101 schema, A102 for shape errors)."""
    path = issue.path or ""
    if issue.rule in RULE_CODES:
        return RULE_CODES[issue.rule]
    if ".schedule" in path or path.endswith(".repeat"):
        return "A201"
    return default


def _tables_digest(tables: dict[str, pa.Table]) -> str:
    """A digest of the evaluated tables (the ``models`` row, which names the spec's text by its
    sha256, left out)."""
    h = hashlib.sha256()
    for name in sorted(tables):
        if name == "models":
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, tables[name].schema) as writer:
            writer.write_table(tables[name])
        h.update(name.encode() + b"\0" + sink.getvalue().to_pybytes())
    return h.hexdigest()


class Reconciler:
    """The checkpoint guard's scratch stores, one per evaluated spec (keyed by the spec file's
    name and the content of its evaluated tables, so drafts that differ only in text that
    changes no table — a doc, ``config_unused``, ``omitted`` — share one), so a second
    checkpoint against the same draft adds only its rows.  Without a folder the stores live in a temporary folder removed by :meth:`close`."""

    def __init__(self, folder: str | Path | None = None):
        self._tmp = None if folder else tempfile.TemporaryDirectory(prefix="archsql-author-")
        self.folder = Path(folder) if folder else Path(self._tmp.name)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stores: dict[str, Path] = {}

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Reconciler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def findings(self, analysis, checkpoint: pa.Table) -> list:
        from archsql.publish_check import reconcile
        from archsql.store import write_store

        spec_file = analysis.tables["models"].column("spec_file")[0].as_py()
        key = hashlib.sha256(f"{analysis.model}\0{spec_file}\0{_tables_digest(analysis.tables)}".encode()).hexdigest()[
            :16
        ]
        if key not in self._stores:
            db = self.folder / f"{key}.duckdb"
            write_store(db, analysis.tables, refresh_derived=False)  # read live: the reconciliation views only
            self._stores[key] = db
        return reconcile(None, checkpoint, model=analysis.model, profile="native", store=self._stores[key])


# The code of each kind of publish-check finding (archsql.publish_check.KINDS): a
# reconciliation result is mapped by what it says is wrong, never by its wording.
KIND_CODES: dict[str, str] = {
    "analysis": "A101",
    "shape_error": "A102",
    "unclaimed": "A501",
    "missing": "A502",
    "dtype": "A503",
    "packed_elements": "A503",
    "elements": "A504",
    "transposed": "A505",
    "reshaped": "A505",
    "bytes": "A506",
    "omitted_unmatched": "A508",
    "storage_rule": "A507",
    "unreadable": "A507",
    "source": "A601",
}


def check(
    draft: str | Path,
    facts: Facts,
    *,
    library=None,
    reconciler: Reconciler | None = None,
    full: bool = False,
) -> GuardReport:
    """Run every guard on the model spec ``draft`` against ``facts``."""
    from archsql.evaluator import evaluate
    from archsql.evaluator.bind import config_path
    from archsql.schema.spec import parse_model
    from archsql.specs import default_library

    library = library or default_library()
    report = GuardReport()
    draft = Path(draft)
    skipped = "skipped: the spec does not evaluate"
    try:
        spec, col = parse_model(draft)
    except (SpecError, ConfigError) as exc:
        report._set("schema", [_err("A101", i) for i in exc.issues] or [GuardError("A101", str(draft), str(exc))])
        report.status.update({g: skipped for g in GUARDS[1:]})
        return report
    if spec is not None and "config" in spec.where and not col.issues:
        used = config_path(spec, library.configs_dir)
        if not used.is_file() or used.read_bytes() != facts.config_path.read_bytes():
            w = spec.where["config"]
            report.errors.append(
                GuardError(
                    "A103",
                    f"{w.file}:{w.line}:{w.column} $.config",
                    f"the spec reads {used}, not the facts' config.json",
                    expected=str(facts.config_path),
                    got=str(spec.config_file),
                    hint="write config: config.json (the facts' copy beside the draft)",
                )
            )
    analysis = None
    try:
        analysis = evaluate(draft, library)
    except ShapeError as exc:
        report.errors += [_err(_spec_issue_code(i, "A102"), i, i.rule) for i in exc.issues] or [
            GuardError("A102", str(draft), str(exc))
        ]
    except (SpecError, ConfigError, EvaluationError) as exc:
        report.errors += [_err(_spec_issue_code(i), i, i.rule) for i in exc.issues] or [
            GuardError("A101", str(draft), str(exc))
        ]
    if analysis is None:
        for guard in GUARDS:
            report.status[guard] = "failed" if any(e.guard == guard for e in report.errors) else skipped
        report.errors.sort(key=lambda e: (GUARDS.index(e.guard), e.code))
        return report
    before, report.errors = report.errors, []
    report._set("schema", before)
    spec = next(iter(analysis.walks.values())).program.model
    report._set(
        "structure", dangling_errors(spec) + window_errors(analysis, facts) + omitted_spec_errors(analysis, spec)
    )
    report.omitted = [{"part": p.name, "reason": p.reason} for p in spec.omitted.values()]
    report._set("axioms", axiom_errors(analysis, draft))
    report._set("coverage", [_err("A301", w) for w in analysis.warnings])
    if facts.inventory is None:
        report.status["params"] = "not applicable: no meta inventory in the facts"
    else:
        errors, note = params_errors(analysis, facts, draft, spec.omitted, report.omitted)
        report._set("params", errors)
        if note:  # the oracle cannot say: not a failure, and the report says why
            report.status["params"] = f"not applicable: {note}"
    if facts.source_dir is None:
        report.status["source"] = "not applicable: no modeling source in the facts"
    else:
        from archsql.source_guard import check_sources

        report._set("source", [_err("A601", i) for i in check_sources(spec, [facts.source_dir])])
    if facts.tensors is None:
        report.status["checkpoint"] = "not applicable: no tensor inventory in the facts"
    elif report.errors and not full:
        report.status["checkpoint"] = "skipped: runs once the other guards pass"
    else:
        try:
            errors = checkpoint_errors(analysis, facts, library, reconciler, draft, spec.omitted, report.omitted)
        except ArchsqlError as exc:  # a store that cannot hold the draft's tables, say
            errors = [_err("A507", i) for i in exc.issues] or [GuardError("A507", str(draft), str(exc))]
        report._set("checkpoint", errors)
    report.status = {g: report.status[g] for g in GUARDS}
    report.errors.sort(key=lambda e: (GUARDS.index(e.guard), e.code))
    return report


def _omitted_where(part) -> str:
    w = part.where
    return f"{w.file}:{w.line}:{w.column} {w.path}"


def _record(records: list[dict] | None, part: str, **counts) -> None:
    if records is None:
        return
    for r in records:
        if r["part"] == part:
            r.update(counts)


def omitted_spec_errors(analysis, spec) -> list[GuardError]:
    """An omitted part whose patterns cover a tensor the spec models contradicts itself: the
    tensor would be both counted and left out (spec names with their layer/expert indices as 0)."""
    if not spec.omitted:
        return []
    names = sorted({_INDEX.sub("0", w["name"]) for w in analysis.tables["weights"].to_pylist()})
    errors = []
    for part, hits in part_indices(spec.omitted, names).items():
        if hits:
            shown = ", ".join(names[i] for i in hits[:3])
            errors.append(
                GuardError(
                    "A205",
                    _omitted_where(spec.omitted[part]),
                    f"omitted part '{part}' covers {len(hits)} tensor(s) the spec models ({shown})",
                    hint="narrow its tensors: patterns to the part the spec leaves out, or remove the modelled nodes",
                )
            )
    return errors


def checkpoint_errors(
    analysis,
    facts: Facts,
    library,
    reconciler: Reconciler | None = None,
    draft: Path | None = None,
    omitted: dict | None = None,
    records: list[dict] | None = None,
) -> list[GuardError]:
    """Reconciliation of the facts' tensor inventory against the spec, tensor by tensor (the
    ``archsql validate`` code path), and the storage rules that match nothing.  The checkpoint
    tensors of ``omitted`` parts are taken out first and counted apart (``records``); a part
    that matches no checkpoint tensor is A508."""
    from archsql.evaluator.storage import NATIVE, bind_storage
    from archsql.publish_check import split_omitted

    binding = bind_storage(analysis, library, profile=NATIVE)
    errors = [_err("A507", i, kind="storage_rule") for i in binding.issues]
    tensors = facts.tensors
    if omitted:
        tensors, counted, unmatched = split_omitted(tensors, omitted)
        for part, (n, size) in counted.items():
            _record(records, part, checkpoint_tensors=n, checkpoint_bytes=size)
        errors += [finding_error(f) for f in unmatched]
    if reconciler is None:
        with Reconciler() as own:
            findings = own.findings(analysis, tensors)
    else:
        findings = reconciler.findings(analysis, tensors)
    # the store names the spec by its file name; the report names the draft by its path
    name = str(analysis.tables["models"].column("spec_file")[0].as_py())
    for f in findings:
        location = f.location
        if draft is not None and location.startswith(f"{name} "):
            location = f"{draft}{location[len(name) :]}"
        errors.append(finding_error(f, location))
    return errors


def finding_error(finding, location: str | None = None) -> GuardError:
    """A publish-check finding as a guard error, its code chosen by its kind (:data:`KIND_CODES`)."""
    f = finding
    return GuardError(KIND_CODES[f.kind], location or f.location, f.message, f.expected, f.got, f.hint, f.kind)


AXIOMS_FILE = Path(__file__).with_name("axioms.yaml")
AXIOM_TABLES = ("caches", "nodes", "shapes", "edges", "terms", "instances", "dims")


@dataclass(frozen=True)
class Axiom:
    """One component invariant: a query over the evaluated tables returning the rows that
    break it (``model, uid, component, expected, got``)."""

    code: str
    name: str
    message: str
    hint: str
    sql: str


def axioms() -> list[Axiom]:
    """The axioms of :data:`AXIOMS_FILE`, in file order."""
    import yaml

    return [Axiom(**{k: " ".join(v.split()) if k != "sql" else v for k, v in a.items()}) for a in
            yaml.safe_load(AXIOMS_FILE.read_text(encoding="utf-8"))]  # fmt: skip


def axiom_violations(con) -> list[tuple[Axiom, dict]]:
    """Every row breaking an axiom, over the tables the DuckDB connection ``con`` holds (one
    model's Analysis tables, or a store's)."""
    out = []
    for axiom in axioms():
        rel = con.sql(axiom.sql)
        out += [(axiom, dict(zip(rel.columns, row, strict=True))) for row in rel.fetchall()]
    return out


def axiom_errors(analysis, draft: Path) -> list[GuardError]:
    """The axioms (:func:`axioms`) on one evaluated draft: its tables in an in-memory DuckDB."""
    import duckdb

    con = duckdb.connect()
    try:
        for name in AXIOM_TABLES:
            con.register(name, analysis.tables[name])
        found = axiom_violations(con)
    finally:
        con.close()
    return [
        GuardError(
            a.code,
            f"{draft} {row['uid']}",
            f"{a.message} (node {row['uid']}, component {row['component']})",
            expected=row["expected"],
            got=row["got"],
            hint=a.hint,
            kind=a.name,
        )
        for a, row in found
    ]


def dangling_errors(spec) -> list[GuardError]:
    """Nodes of the model graph whose output no node, stack or output reads: a weight that
    reaches nothing is counted in the parameters but computes nothing the model returns."""
    read = {ref.split(".")[0] for node in spec.graph.values() for ref in node.inputs}
    read |= {str(o).split(".")[0] for o in spec.outputs}
    out = []
    for name, node in spec.graph.items():
        if name not in read:
            w = node.where
            out.append(
                GuardError(
                    "A204",
                    f"{w.file}:{w.line}:{w.column} {w.path}",
                    f"node '{name}' is read by no node and is not an output",
                    hint="connect it (another node's in:, or outputs:) or remove it; a checkpoint tensor it "
                    "claims belongs to the node that really uses it",
                )
            )
    return out


def _sliding_layers(config: dict, layers: int) -> tuple[set[int] | None, int | None, str]:
    """The layers the config says attend a sliding window (``None``: it does not say which, or
    says nothing of windows), the window, and the config path that says so."""
    for cfg, prefix in ((config, ""), (config.get("text_config") or {}, "text_config.")):
        if not isinstance(cfg, dict):
            continue
        window = cfg.get("sliding_window")
        window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
        types = cfg.get("layer_types")
        if isinstance(types, list) and len(types) == layers:
            sliding = {i for i, t in enumerate(types) if "sliding" in str(t)}
            return sliding, window, f"$.{prefix}layer_types"
        if window is not None:
            on = cfg.get("use_sliding_window", True) is not False
            return (None if on else set()), window, f"$.{prefix}sliding_window"
    return None, None, "$"  # the config says nothing of sliding windows (a chunked cap is another key's)


def window_errors(analysis, facts: Facts) -> list[GuardError]:
    """Windows against the config: the layers whose caches are capped must be the layers
    ``layer_types`` marks sliding; with only ``sliding_window`` (and ``use_sliding_window`` not
    false), some layer must be capped; every cap must be ``sliding_window``."""
    sched = analysis.tables["layer_schedule"].to_pylist()
    caches = analysis.tables["caches"].to_pylist()
    by_stack: dict[str, dict[int, str]] = defaultdict(dict)
    for r in sched:
        by_stack[r["stack"]][r["layer"]] = r["template"]
    if not by_stack:
        return []
    stack = max(by_stack, key=lambda s: len(by_stack[s]))
    layers = by_stack[stack]
    windowed_templates: dict[str, set[int]] = defaultdict(set)
    for c in caches:
        parts = c["uid"].split("/")
        if len(parts) > 2 and parts[0] == stack and c["window"]:
            windowed_templates[parts[1]].add(int(c["window"]))
    capped = {i for i, t in layers.items() if t in windowed_templates}
    sliding, window, where = _sliding_layers(facts.config, len(layers))
    spec_file = str(analysis.tables["models"].column("spec_file")[0].as_py())
    at = f"{facts.config_path} {where}"
    errors = []
    if sliding is None:
        if window is not None and not capped:
            errors.append(
                GuardError(
                    "A203",
                    at,
                    f"the config sets sliding_window = {window} but no layer of stack '{stack}' caps its cache",
                    expected=f"caches capped at {window} on the sliding layers",
                    got="every cache uncapped",
                    hint=f"bind the window dim to config.sliding_window in {Path(spec_file).name} "
                    "(a component with a windowed cache), or say under config_unused why it does not apply",
                )
            )
    elif sliding != capped:

        def ranges(s):
            return ", ".join(map(str, sorted(s)[:12])) + (" …" if len(s) > 12 else "")

        errors.append(
            GuardError(
                "A203",
                at,
                f"layers with a capped cache differ from the sliding layers the config lists (stack '{stack}')",
                expected=f"{len(sliding)} sliding layers",
                got=f"{len(capped)} capped"
                + (f"; not capped: {ranges(sliding - capped)}" if sliding - capped else "")
                + (f"; capped but full: {ranges(capped - sliding)}" if capped - sliding else ""),
                hint="schedule the layers from the config list (schedule: {from: config.layer_types, map: …}) "
                "with a windowed template for the sliding values",
            )
        )
    if window is not None:
        wrong = sorted({w for ws in windowed_templates.values() for w in ws if w != window})
        if wrong:
            errors.append(
                GuardError(
                    "A203",
                    at,
                    "a cache is capped at another window than the config's sliding_window",
                    expected=str(window),
                    got=", ".join(map(str, wrong)),
                    hint="bind the window dim to config.sliding_window",
                )
            )
    return errors


_SCALE_SUFFIXES = ("_scale_inv", ".weight_scale", ".input_scale", "_scales")
_INDEX = re.compile(r"(?<=\.)\d+(?=\.)|\{[a-z_]+\}")


def _pattern(name: str) -> str:
    return _INDEX.sub("*", name)


def inventory_params(inventory: dict) -> dict[str, int]:
    """Parameters per name pattern (layer and expert indices as ``*``) of a meta inventory's
    checkpoint tensors: quantization scales are storage, not parameters; an MXFP4 ``_blocks``
    tensor holds two parameters per byte."""
    from math import prod

    out: dict[str, int] = defaultdict(int)
    for t in inventory["checkpoint_tensors"]:
        name = t["name"]
        if name.endswith(_SCALE_SUFFIXES):
            continue
        n = prod(t["shape"])
        if name.endswith("_blocks"):
            name, n = name.removesuffix("_blocks"), 2 * n
        out[_pattern(name)] += n
    return dict(out)


def spec_params(analysis, leave_out: list[re.Pattern] = ()) -> dict[str, int]:
    """Parameters per name pattern of the spec: each weight's elements × its instance count.
    ``leave_out``: regular expressions (searched, as transformers' ``ignored_on_load``) over
    the concrete names, a layer's copies named by its own layer number (from
    ``layer_schedule``) and other indices by 0; what they match is counted under ``None``."""
    counts = {r["uid"]: r["count"] for r in analysis.tables["instances"].to_pylist()}
    out: dict[str | None, int] = defaultdict(int)
    layers: dict[tuple[str, str], list[int]] = defaultdict(list)
    if leave_out:
        for r in analysis.tables["layer_schedule"].to_pylist():
            layers[(r["stack"], r["template"])].append(r["layer"])
        where = {r["uid"]: (r["stack"], r["template"]) for r in analysis.tables["nodes"].to_pylist()}
    for w in analysis.tables["weights"].to_pylist():
        total = w["elements"] * counts.get(w["uid"], 1)
        if not leave_out:
            out[_pattern(w["name"])] += total
            continue
        at = layers.get(where.get(w["uid"], (None, None)), []) if "{layer}" in w["name"] else []
        for layer in at or [None]:
            name = w["name"] if layer is None else w["name"].replace("{layer}", str(layer))
            name = re.sub(r"\{[a-z_]+\}", "0", name)
            share = total // len(at) if at else total
            out[None if any(p.search(name) for p in leave_out) else _pattern(w["name"])] += share
    return dict(out)


def params_errors(
    analysis, facts: Facts, draft: Path, omitted: dict | None = None, records: list[dict] | None = None
) -> tuple[list[GuardError], str | None]:
    """Total parameters of the modelled part against the meta inventory's, the inventory
    tensors of ``omitted`` parts taken out and counted apart (``records``); a part matching no
    inventory tensor is A402.  A note instead when the inventory leaves out tensors the
    checkpoint has (transformers' ``ignored_on_load``): the oracle cannot say."""
    inv = facts.inventory
    errors: list[GuardError] = []
    if omitted:
        tensors = inv["checkpoint_tensors"]
        hits = part_indices(omitted, [t["name"] for t in tensors])
        left_out = {i for ix in hits.values() for i in ix}
        for part, ix in hits.items():
            counted = inventory_params({"checkpoint_tensors": [tensors[i] for i in ix]})
            _record(records, part, inventory_tensors=len(ix), inventory_params=sum(counted.values()))
            if not ix:
                errors.append(
                    GuardError(
                        "A402",
                        _omitted_where(omitted[part]),
                        f"omitted part '{part}' matches no tensor of the meta inventory",
                        expected=f"a tensor name matching {', '.join(omitted[part].tensors) or '(no pattern)'}",
                        hint="write the patterns against the checkpoint's own names, or remove the part",
                    )
                )
        inv = {**inv, "checkpoint_tensors": [t for i, t in enumerate(tensors) if i not in left_out]}
    leave_out = []
    for pattern in inv.get("ignored_on_load") or []:
        try:
            leave_out.append(re.compile(pattern))
        except (re.error, TypeError):
            return (
                errors,
                f"the inventory leaves out tensors by a pattern that is not a regular expression: {pattern!r}",
            )
    if leave_out:  # patterns of on-disk tensors the inventory may lack: left out on both sides
        kept, dropped = [], []
        for t in inv["checkpoint_tensors"]:
            (dropped if any(p.search(t["name"]) for p in leave_out) else kept).append(t)
        inv = {**inv, "checkpoint_tensors": kept}
    expected, got = inventory_params(inv), spec_params(analysis, leave_out)
    if leave_out:
        ignored = got.pop(None, 0)
        if records is not None:
            records.append(
                {"part": "ignored_on_load", "reason": "tensors transformers drops on load (the meta inventory "
                 "may lack them): the spec's and the inventory's tensors matching them are left out",
                 "patterns": [p.pattern for p in leave_out], "spec_params": ignored,
                 "inventory_params": sum(inventory_params({"checkpoint_tensors": dropped}).values())}
            )  # fmt: skip
    total_e, total_g = sum(expected.values()), sum(got.values())
    if total_e == total_g:
        return errors, None
    diffs = sorted(
        (
            (p, got.get(p, 0) - expected.get(p, 0))
            for p in set(expected) | set(got)
            if got.get(p, 0) != expected.get(p, 0)
        ),
        key=lambda x: (-abs(x[1]), x[0]),
    )
    shown = "; ".join(f"{p} {d:+,}" for p, d in diffs[:4])
    return [
        *errors,
        GuardError(
            "A401",
            f"{draft} $.dims",
            f"total parameters differ from the meta inventory by {total_g - total_e:+,}",
            expected=f"{total_e:,}",
            got=f"{total_g:,}",
            hint=f"largest differences by tensor (spec − inventory): {shown}; check the dims bound to those "
            "tensors' shapes against config.json",
        ),
    ], None
