"""The architecture audit card: is a candidate a clean single-variable change of a baseline,
what does it cost, what evidence does it still need, and what is the decision?

1. **Profiles.**  Both models are evaluated by the one engine and written to the design
   store; each profile is the ``architecture_profile`` row (hidden size, layers, heads, KV
   heads, head dim, KV latent, attention type, FFN width, experts and top-k, state
   representation, attention pattern, layer schedule) plus every bound dim no field accounts
   for.  Validation: positive sizes, heads divisible by KV heads, top-k within the experts.
2. **Single-variable check.**  Exactly one structural field differs — derived fields follow
   their sources (``audit_fields.yaml``) — and it is the declared ``changed_field``.
3. **Ledgers** from the views (``sql/audit_ledger.sql``): params by role, totals, weight
   bytes, KV and state bytes per token and per request at a context; budgets are checked
   against their deltas.
4. **Evidence.**  The changed field routes to a benchmark family; evidence records are JSON
   files referenced by path and content hash (a changed or missing file is reported and
   cannot support accept), each with workload, quality, cost, failure and an evidence level.
5. **Decision**: reject (invalid, not single-variable, over budget), tune (evidence missing,
   failed, or not same-family with passing quality and cost), accept.

Cards are stored as rows in the design store (``audit_cards``, ``audit_fields``,
``audit_ledger``, ``audit_evidence``) and printed by :func:`render`.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql.design import store as dstore
from archsql.errors import ArchsqlError, DesignError, Issue, did_you_mean

FIELDS_FILE = Path(__file__).with_name("audit_fields.yaml")
DECISIONS = ("reject", "tune", "accept")
SAME_FAMILY = "same_family_benchmark"
DIM_FIELD = "dims."


@cache
def audit_rules() -> dict[str, Any]:
    """The card's data (fields, routes, evidence levels), from audit_fields.yaml."""
    from archsql.schema.yamlsrc import load_yaml

    return load_yaml(FIELDS_FILE)


def evidence_levels() -> list[str]:
    return list(audit_rules()["evidence_levels"])


# ---------------------------------------------------------------------------- budgets

_AMOUNT = re.compile(r"^([+-]?)(\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(%|[KMBT]|KiB|MiB|GiB|TiB)?$", re.IGNORECASE)
_SCALE = {
    None: 1,
    "k": 1e3,
    "m": 1e6,
    "b": 1e9,
    "t": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
BUDGET_ITEMS = (
    "params",
    "active_params",
    "weight_bytes",
    "kv_bytes_per_token",
    "state_bytes_per_request",
    "kv_bytes_per_request",
)


@dataclass(frozen=True)
class Budget:
    """The largest allowed candidate − baseline delta of a ledger item: an amount
    (``params=1.5B``, ``kv_bytes_per_token=-1KiB``) or a share of the baseline (``params=+2%``)."""

    item: str
    text: str
    amount: float
    percent: bool

    @classmethod
    def parse(cls, text: str) -> Budget:
        item, sep, value = text.partition("=")
        item, value = item.strip(), value.strip()
        if item not in BUDGET_ITEMS:
            raise DesignError(
                f"--budget {text!r}: unknown ledger item '{item}'",
                [Issue(f"budgets name one of {', '.join(BUDGET_ITEMS)}", hint=did_you_mean(item, BUDGET_ITEMS))],
            )
        match = _AMOUNT.match(value) if sep else None
        if match is None:
            raise DesignError(
                f"--budget {text!r} is not ITEM=LIMIT",
                [Issue("LIMIT is the largest allowed delta: +2%, -10%, 1.5B, 500M, -1GiB, 0", got=value or None)],
            )
        sign = -1.0 if match.group(1) == "-" else 1.0
        unit = match.group(3)
        amount = sign * float(match.group(2)) * (1 if unit == "%" else _SCALE[unit.lower() if unit else None])
        return cls(item, value, amount, unit == "%")

    def limit(self, baseline: float) -> float:
        return self.amount / 100.0 * baseline if self.percent else self.amount


# ---------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class EvidenceRef:
    """An evidence record referenced by path and content hash (``PATH#sha256:HEX``); without a
    hash the file's current hash is recorded as the reference."""

    path: Path
    sha256: str | None = None

    @classmethod
    def parse(cls, text: str) -> EvidenceRef:
        path, sep, digest = str(text).partition("#sha256:")
        if sep and not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise DesignError(
                f"--evidence {text!r}: the hash after '#sha256:' must be 64 hex digits", [Issue("got " + digest)]
            )
        return cls(Path(path), digest or None)

    @classmethod
    def of(cls, path: str | Path) -> EvidenceRef:
        """Reference a file as it is now."""
        return cls(Path(path), file_sha256(Path(path)))

    @property
    def text(self) -> str:
        return f"{self.path}#sha256:{self.sha256}" if self.sha256 else str(self.path)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class EvidenceCheck:
    path: str
    sha256_referenced: str | None
    sha256_now: str | None
    status: str  # ok | missing | changed | invalid | other_benchmark | other_models
    benchmark: str | None = None
    evidence_level: str | None = None
    quality_pass: bool | None = None
    cost_pass: bool | None = None
    failure: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def passes(self) -> bool:
        return self.status == "ok" and bool(self.quality_pass) and bool(self.cost_pass) and self.failure is None


def check_evidence(ref: EvidenceRef, benchmark: str | None, baseline: str, candidate: str) -> EvidenceCheck:
    """Read one referenced record and say whether it may count for this card."""
    rules = audit_rules()
    out = EvidenceCheck(str(ref.path), ref.sha256, None, "ok")
    if not ref.path.is_file():
        out.status = "missing"
        out.problems.append(f"evidence file {ref.path} does not exist")
        return out
    out.sha256_now = file_sha256(ref.path)
    if out.sha256_referenced is None:
        out.sha256_referenced = out.sha256_now  # referenced now: the card records this hash
    elif out.sha256_referenced != out.sha256_now:
        out.status = "changed"
        out.problems.append(
            f"evidence file {ref.path} changed since it was referenced "
            f"(sha256 {out.sha256_referenced[:12]}… then, {out.sha256_now[:12]}… now)"
        )
        return out
    try:
        record = json.loads(ref.path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        out.status = "invalid"
        out.problems.append(f"{ref.path} is not a JSON evidence record: {exc}")
        return out
    if not isinstance(record, dict):
        out.status = "invalid"
        out.problems.append(f"{ref.path}: an evidence record is a JSON object")
        return out
    required = ["benchmark", "evidence_level", *rules["evidence_fields"]]
    missing = [k for k in required if k not in record]
    if missing:
        out.status = "invalid"
        out.problems.append(f"{ref.path}: missing field(s) {', '.join(missing)} (required: {', '.join(required)})")
    out.benchmark = record.get("benchmark")
    out.evidence_level = record.get("evidence_level")
    if out.evidence_level is not None and out.evidence_level not in rules["evidence_levels"]:
        out.status = "invalid"
        out.problems.append(
            f"{ref.path}: unknown evidence_level {out.evidence_level!r} (one of {', '.join(rules['evidence_levels'])})"
        )
    for key in ("quality", "cost"):
        value = record.get(key)
        if key in record and not (isinstance(value, dict) and isinstance(value.get("pass"), bool)):
            out.status = "invalid"
            out.problems.append(f"{ref.path}: '{key}' must be an object with a boolean 'pass' (and its metric)")
        elif isinstance(value, dict):
            setattr(out, f"{key}_pass", value.get("pass"))
    if "workload" in record and not record["workload"]:
        out.status = "invalid"
        out.problems.append(f"{ref.path}: 'workload' must describe the benchmark's workload")
    failure = record.get("failure")
    out.failure = None if failure in (None, "", {}) else (failure if isinstance(failure, str) else json.dumps(failure))
    if out.status != "ok":
        return out
    if benchmark is not None and out.benchmark != benchmark:
        out.status = "other_benchmark"
        out.problems.append(f"{ref.path} is a {out.benchmark} record; this change needs {benchmark}")
    for side, model in (("baseline", baseline), ("candidate", candidate)):
        if record.get(side) not in (None, model):
            out.status = "other_models"
            out.problems.append(f"{ref.path} measured {side} {record[side]!r}, not {model!r}")
    return out


# ---------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class FieldRow:
    field: str
    baseline: str | None
    candidate: str | None
    differs: bool
    counted: bool  # a difference that counts toward the single-variable check
    benchmark: str


def profile_fields(rows: list[dict[str, Any]], baseline: str, candidate: str, library) -> list[FieldRow]:
    """Field-by-field comparison of two profiles (rows of sql/audit_profile.sql)."""
    rules = audit_rules()
    fields = rules["fields"]
    values: dict[str, dict[str, str | None]] = {baseline: {}, candidate: {}}
    dims: dict[str, dict[str, str | None]] = {baseline: {}, candidate: {}}
    for r in rows:
        (values if r["source"] == "profile" else dims)[r["model"]][r["field"]] = r["value"]
    covered = {d for spec in fields.values() for d in spec.get("dims", ())}
    out: dict[str, tuple[str | None, str | None, str]] = {}
    for name, spec in fields.items():
        out[name] = (values[baseline].get(name), values[candidate].get(name), spec["benchmark"])
    for dim in sorted((set(dims[baseline]) | set(dims[candidate])) - covered):
        kind = library.dims.get(dim, {}).get("kind")
        route = rules["dim_benchmarks"].get(dim) or rules["kind_benchmarks"].get(kind, "block_stability")
        out[DIM_FIELD + dim] = (dims[baseline].get(dim), dims[candidate].get(dim), route)
    differs = {name for name, (a, b, _) in out.items() if a != b}
    rows_out = []
    for name, (a, b, route) in out.items():
        sources = fields.get(name, {}).get("derived_from", ())
        counted = name in differs and not any(s in differs for s in sources)
        rows_out.append(FieldRow(name, a, b, name in differs, counted, route))
    return rows_out


_POSITIVE = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "kv_lora_rank",
    "intermediate_size",
    "moe_intermediate_size",
    "num_experts",
    "num_experts_per_tok",
    "vocab_size",
)


def validate_profile(model: str, profile: dict[str, str | None]) -> list[str]:
    """Problems of one profile: non-positive sizes, heads not divisible by KV heads, more
    experts per token than experts."""

    def num(name: str) -> int | None:
        value = profile.get(name)
        return None if value is None else int(value)

    sizes = {name: num(name) for name in _POSITIVE}
    problems = [f"{model}: {name} = {v} must be positive" for name, v in sizes.items() if v is not None and v <= 0]
    heads, kv = num("num_attention_heads"), num("num_key_value_heads")
    if heads and kv and kv > 0 and (heads % kv or kv > heads):
        problems.append(
            f"{model}: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv} "
            "(each KV head serves a whole group of query heads)"
        )
    experts, top_k = num("num_experts"), num("num_experts_per_tok")
    if experts and top_k and top_k > experts:
        problems.append(f"{model}: num_experts_per_tok = {top_k} exceeds num_experts = {experts}")
    return problems


# ---------------------------------------------------------------------------- the card

CARD_SCHEMAS = {
    "audit_cards": pa.schema(
        [
            ("audit_id", pa.string()),
            ("created_at", pa.timestamp("us")),
            ("baseline", pa.string()),
            ("candidate", pa.string()),
            ("changed_field", pa.string()),
            ("differing_fields", pa.list_(pa.string())),
            ("single_variable", pa.bool_()),
            ("valid", pa.bool_()),
            ("benchmark", pa.string()),
            ("evidence_level", pa.string()),
            ("decision", pa.string()),
            ("reasons", pa.list_(pa.string())),
            ("context", pa.int64()),
            ("dtype", pa.string()),
            ("budgets", pa.list_(pa.string())),
        ]
    ),
    "audit_fields": pa.schema(
        [
            ("audit_id", pa.string()),
            ("field", pa.string()),
            ("baseline", pa.string()),
            ("candidate", pa.string()),
            ("differs", pa.bool_()),
            ("counted", pa.bool_()),
            ("benchmark", pa.string()),
        ]
    ),
    "audit_ledger": pa.schema(
        [
            ("audit_id", pa.string()),
            ("section", pa.string()),
            ("item", pa.string()),
            ("unit", pa.string()),
            ("baseline", pa.float64()),
            ("candidate", pa.float64()),
            ("delta", pa.float64()),
            ("ratio", pa.float64()),
        ]
    ),
    "audit_evidence": pa.schema(
        [
            ("audit_id", pa.string()),
            ("path", pa.string()),
            ("sha256_referenced", pa.string()),
            ("sha256_now", pa.string()),
            ("status", pa.string()),
            ("benchmark", pa.string()),
            ("evidence_level", pa.string()),
            ("quality_pass", pa.bool_()),
            ("cost_pass", pa.bool_()),
            ("failure", pa.string()),
            ("problems", pa.list_(pa.string())),
        ]
    ),
}


@dataclass
class AuditCard:
    audit_id: str
    created_at: datetime
    baseline: str
    candidate: str
    changed_field: str | None
    fields: list[FieldRow]
    problems: list[str]  # validation / evaluation problems (invalid → reject)
    differing: list[str]  # counted differences
    single_variable: bool
    benchmark: str | None  # routed family of the changed field
    evidence: list[EvidenceCheck]
    evidence_level: str  # the highest level held
    ledger: pa.Table
    budgets: list[Budget]
    budget_notes: list[str]
    decision: str
    reasons: list[str]
    context: int
    dtype: str
    db: Path | None = None
    catalog_specs: bool = False  # both models are catalog specs bound to published configs

    @property
    def valid(self) -> bool:
        return not self.problems

    def ledger_rows(self) -> list[dict[str, Any]]:
        return self.ledger.to_pylist()

    def ledger_value(self, item: str, section: str | None = None) -> dict[str, Any]:
        for row in self.ledger_rows():
            if row["item"] == item and (section is None or row["section"] == section):
                return row
        raise KeyError(item)

    def tables(self) -> dict[str, pa.Table]:
        """The card as rows of the audit_* tables."""
        card = {
            "audit_id": self.audit_id,
            "created_at": self.created_at,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "changed_field": self.changed_field,
            "differing_fields": self.differing,
            "single_variable": self.single_variable,
            "valid": self.valid,
            "benchmark": self.benchmark,
            "evidence_level": self.evidence_level,
            "decision": self.decision,
            "reasons": self.reasons,
            "context": self.context,
            "dtype": self.dtype,
            "budgets": [f"{b.item}={b.text}" for b in self.budgets],
        }
        fields = [{"audit_id": self.audit_id, **f.__dict__} for f in self.fields]
        ledger = [{"audit_id": self.audit_id, **r} for r in self.ledger_rows()]
        evidence = [{"audit_id": self.audit_id, **e.__dict__} for e in self.evidence]
        rows = {"audit_cards": [card], "audit_fields": fields, "audit_ledger": ledger, "audit_evidence": evidence}
        return {name: pa.Table.from_pylist(rows[name], schema=schema) for name, schema in CARD_SCHEMAS.items()}


def audit(
    baseline: str | Path,
    candidate: str | Path,
    *,
    changed_field: str | None = None,
    budgets: list[str | Budget] | tuple = (),
    evidence: list[str | EvidenceRef] | tuple = (),
    context: int | str = "32k",
    dtype: str = "bf16",
    db: str | Path | None = None,
    library=None,
) -> AuditCard:
    """Evaluate both models, build the card, store it in the design store and return it."""
    from archsql.evaluator import evaluate
    from archsql.specs import MODELS_DIR, default_library

    library = library or default_library()
    context = dstore.parse_tokens(context)
    dstore.check_dtype(dtype)
    budgets = [b if isinstance(b, Budget) else Budget.parse(b) for b in budgets]
    refs = [e if isinstance(e, EvidenceRef) else EvidenceRef.parse(e) for e in evidence]
    paths = [library.model_path(m) for m in (baseline, candidate)]  # unknown names: located SpecError
    problems: list[str] = []
    analyses = []
    names = []
    for role, path in zip(("baseline", "candidate"), paths, strict=True):
        try:
            analyses.append(evaluate(path, library=library))
            names.append(analyses[-1].model)
        except ArchsqlError as exc:
            first = exc.issues[0].render() if exc.issues else str(exc)
            problems.append(f"{role} {path.stem} does not evaluate: {first}")
            names.append(path.stem)
    db = dstore.design_db(db)
    if len(analyses) == 2 and names[0] == names[1]:
        raise DesignError(f"baseline and candidate are the same model '{names[0]}'")
    fields: list[FieldRow] = []
    ledger = CARD_SCHEMAS["audit_ledger"].empty_table().drop(["audit_id"])
    if len(analyses) == 2:
        decode = dstore.decode_workload(context, 1)
        # no deployment: the card reads no per-deployment view, and each deployment costs its rows
        dstore.write(db, analyses, workloads=dstore.workload_rows([context], 1), deployments=[])
        rows = dstore.read(db, "audit_profile", {"baseline": names[0], "candidate": names[1]}).to_pylist()
        fields = profile_fields(rows, names[0], names[1], library)
        for model in names:
            profile = {r["field"]: r["value"] for r in rows if r["model"] == model and r["source"] == "profile"}
            problems += validate_profile(model, profile)
        ledger = dstore.read(
            db, "audit_ledger", {"baseline": names[0], "candidate": names[1], "decode": decode, "dtype": dtype}
        )
    catalog = all(p.resolve().parent == MODELS_DIR.resolve() for p in paths)
    card = AuditCard(
        "", datetime.now(UTC), names[0], names[1], None, fields, problems, [], False, None, [], "", ledger,
        [], [], "", [], context, dtype, db, catalog,
    )  # fmt: skip
    return _assess(card, changed_field, budgets, refs, store=len(analyses) == 2)


def reassess(
    card: AuditCard,
    *,
    changed_field: str | None = None,
    budgets: list[str | Budget] | tuple | None = None,
    evidence: list[str | EvidenceRef] | tuple = (),
) -> AuditCard:
    """The same baseline, candidate, profiles and ledger judged again — with other evidence,
    budgets or declared field (None keeps the card's) — as a new card, decided and stored."""
    budgets = card.budgets if budgets is None else [b if isinstance(b, Budget) else Budget.parse(b) for b in budgets]
    refs = [e if isinstance(e, EvidenceRef) else EvidenceRef.parse(e) for e in evidence]
    field_name = card.changed_field if changed_field is None else changed_field
    fresh = replace(card, budget_notes=[], reasons=[], evidence=[])
    return _assess(fresh, field_name, budgets, refs, store=bool(card.fields))


def _assess(card: AuditCard, changed_field, budgets, refs, *, store: bool) -> AuditCard:
    """Single-variable check, evidence, decision; the card is stored when it has profiles."""
    rules = audit_rules()
    known_fields = [f.field for f in card.fields] or list(rules["fields"])
    if changed_field is not None and changed_field not in known_fields:
        raise DesignError(
            f"--changed-field '{changed_field}' is not a structural field of this audit",
            [
                Issue(
                    f"fields: {', '.join(known_fields)}",
                    hint=did_you_mean(changed_field, known_fields) or "a bound dim no field covers is dims.<name>",
                )
            ],
        )
    card.audit_id = uuid.uuid4().hex[:12]
    card.created_at = datetime.now(UTC).replace(tzinfo=None)
    card.changed_field = changed_field
    card.budgets = list(budgets)
    card.differing = [f.field for f in card.fields if f.counted]
    card.single_variable = len(card.differing) == 1 and card.differing[0] == changed_field
    route = next((f.benchmark for f in card.fields if f.field == changed_field), None)
    if route is None and changed_field in rules["fields"]:
        route = rules["fields"][changed_field]["benchmark"]
    card.benchmark = route
    card.evidence = [check_evidence(r, route, card.baseline, card.candidate) for r in refs]
    card.evidence_level = _level_held(card.catalog_specs, card.evidence)
    _decide(card)
    if store and card.db is not None:
        for name, table in card.tables().items():
            dstore.append_rows(card.db, name, table)
    return card


def _level_held(catalog_specs: bool, checks: list[EvidenceCheck]) -> str:
    """cpu_structure_ledger always (this card); checkpoint_config_audit when both models are
    catalog specs bound to their published config.json; above that, verified records."""
    levels = evidence_levels()
    held = levels.index("checkpoint_config_audit") if catalog_specs else 0
    for c in checks:
        if c.status == "ok" and c.evidence_level in levels:
            held = max(held, levels.index(c.evidence_level))
    return levels[held]


def _decide(card: AuditCard) -> None:
    reasons: list[str] = []
    if card.problems:
        card.decision = "reject"
        card.reasons = [f"invalid: {p}" for p in card.problems]
        return
    if not card.single_variable:
        if not card.differing:
            reasons.append("not a change: no structural field differs between baseline and candidate")
        elif len(card.differing) > 1:
            reasons.append(
                f"not single-variable: {len(card.differing)} structural fields differ: {', '.join(card.differing)}"
                + (f" (declared: {card.changed_field})" if card.changed_field else "")
            )
        elif card.changed_field is None:
            reasons.append(
                f"no changed_field declared; the one field that differs is {card.differing[0]} "
                f"(declare it: --changed-field {card.differing[0]})"
            )
        else:
            reasons.append(f"the field that differs is {card.differing[0]}, not the declared {card.changed_field}")
    rows = {r["item"]: r for r in card.ledger_rows() if r["section"] in ("totals", "kv")}
    over = []
    for b in card.budgets:
        row = rows.get(b.item)
        if row is None or row["baseline"] is None:
            over.append(f"budget {b.item}={b.text}: no ledger value to check")
            continue
        limit = b.limit(row["baseline"])
        note = f"{b.item} delta {_short(row['delta'])} vs budget {b.text} (limit {_short(limit)})"
        card.budget_notes.append(("over " if row["delta"] > limit else "within ") + note)
        if row["delta"] > limit:
            over.append(f"over budget: {note}")
    reasons += over
    if reasons:
        card.decision, card.reasons = "reject", reasons
        return
    usable = [e for e in card.evidence if e.status == "ok"]
    for e in card.evidence:
        if e.status in ("missing", "changed", "invalid"):
            reasons.append(f"evidence {e.status}: {'; '.join(e.problems)} — it cannot support accept")
        elif e.status in ("other_benchmark", "other_models"):
            reasons.append(f"evidence not counted: {'; '.join(e.problems)}")
    for e in usable:
        if e.failure is not None:
            reasons.append(f"failure recorded in {e.path}: {e.failure}")
        for key in ("quality", "cost"):
            if getattr(e, f"{key}_pass") is False:
                reasons.append(f"{key} did not pass in {e.path}")
    passing = [e for e in usable if e.passes and e.evidence_level == SAME_FAMILY]
    bench = card.benchmark or "benchmark"
    if not usable:
        reasons.append(
            f"evidence missing: a record of the {bench} benchmark at level {SAME_FAMILY} with workload, "
            f"quality, cost and failure (held: {card.evidence_level})"
        )
    elif not passing and not any(r.startswith(("failure", "quality", "cost")) for r in reasons):
        levels = ", ".join(sorted({e.evidence_level for e in usable}))
        reasons.append(f"no {SAME_FAMILY} record with passing quality and cost (records at: {levels})")
    if reasons:
        card.decision, card.reasons = "tune", reasons
        return
    card.decision = "accept"
    card.reasons = [
        f"single-variable change of {card.changed_field}; "
        + (", ".join(card.budget_notes) if card.budget_notes else "no budget declared")
        + f"; {len(passing)} {SAME_FAMILY} {card.benchmark} record(s) pass quality and cost"
    ]


def _short(x: float) -> str:
    """-805306368 → '-805.3M' (signed, four significant digits)."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:+.4g}{suffix}"
    return f"{x:+.4g}"


# ---------------------------------------------------------------------------- printing


def render(card: AuditCard, console) -> None:
    """Print the card for a terminal."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from archsql.output import delta as signed
    from archsql.output import human, human_bytes

    style = {"reject": "bold red", "tune": "bold yellow", "accept": "bold green"}[card.decision]
    head = Text.assemble(
        ("audit ", "bold"),
        card.audit_id,
        "  ",
        (card.baseline, "red"),
        " → ",
        (card.candidate, "green"),
        f"   changed_field: {card.changed_field or '(not declared)'}   decision: ",
        (card.decision.upper(), style),
    )
    console.print(Panel(head, expand=False))
    if card.fields:
        table = Table(title="profile", header_style="bold")
        for column in ("field", "baseline", "candidate", ""):
            table.add_column(column)
        for f in card.fields:
            if f.field.startswith(DIM_FIELD) and not f.differs:
                continue
            mark = "counted" if f.counted else ("follows" if f.differs else "")
            table.add_row(
                f.field, f.baseline or "—", f.candidate or "—", Text(mark, style="yellow" if f.counted else "dim")
            )
        console.print(table)
    verdict = "yes" if card.single_variable else "no"
    console.print(
        f"single-variable: {verdict} (differs: {', '.join(card.differing) or 'nothing'}); "
        f"benchmark: {card.benchmark or '—'}; evidence level held: {card.evidence_level}",
        markup=False,
    )
    if card.ledger.num_rows:
        table = Table(
            title=f"ledger (weights as each checkpoint stores them; KV in {card.dtype}, per request at context "
            f"{card.context})",
            header_style="bold",
        )
        for column, justify in (("item", "left"), ("baseline", "right"), ("candidate", "right"), ("delta", "right")):
            table.add_column(column, justify=justify)
        for r in card.ledger_rows():
            fmt = human_bytes if "bytes" in r["unit"] else human
            table.add_row(
                f"{r['section']}.{r['item']}" if r["section"] == "params_by_role" else r["item"],
                fmt(r["baseline"]),
                fmt(r["candidate"]),
                signed(r["delta"], fmt),
            )
        console.print(table)
    for note in card.budget_notes:
        console.print(f"budget: {note}", markup=False)
    for e in card.evidence:
        console.print(
            f"evidence {e.path}: {e.status} ({e.benchmark or '?'}, {e.evidence_level or '?'}; "
            f"quality {e.quality_pass}, cost {e.cost_pass}, failure {e.failure or 'none'}) sha256 {e.sha256_referenced}",
            markup=False,
        )
    for reason in card.reasons:
        console.print(f"  • {reason}", markup=False)
    if card.db is not None:
        console.print(
            f"stored as audit {card.audit_id} in {card.db} (tables audit_cards, audit_fields, …)", markup=False
        )


__all__ = [
    "AuditCard",
    "Budget",
    "EvidenceCheck",
    "EvidenceRef",
    "FieldRow",
    "audit",
    "audit_rules",
    "check_evidence",
    "profile_fields",
    "reassess",
    "render",
    "validate_profile",
]
