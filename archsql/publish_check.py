"""The publish check: ``validate()`` says whether a spec may be published — a list of
:class:`Finding` (one reason it may not, per guard), empty when it may.

Guards (design §10) implemented here:

- **analysis** — the spec cannot be evaluated (a located :class:`~archsql.errors.SpecError`,
  :class:`~archsql.errors.ConfigError` or :class:`~archsql.errors.EvaluationError`);
- **shape** — tensors that cannot be joined: the evaluator's :class:`~archsql.errors.ShapeError`
  issues, and checkpoint tensors whose element count matches the spec's but whose shape does not;
- **packing** — storage rules: an override or ignore pattern that matches no tensor, a scheme
  formula that is not a whole number, no storage dtype; and, per checkpoint tensor, the stored
  dtype and (for quantized parts) the stored element count, each checked on its own so that
  two compensating errors cannot pass;
- **weight** — against a checkpoint: file tensors no spec tensor claims, spec tensors the file
  does not have, element-count mismatches of unquantized tensors, and the byte totals as a
  final checksum; an unreadable checkpoint is a weight error too;
- **omitted** — a spec's ``omitted:`` parts (a vision tower it does not model): their
  checkpoint tensors are taken out before reconciling and counted in ``warnings`` (a part
  matching no tensor is a warning too: a checkpoint may lack the part; the author guards, whose
  spec is written for the very checkpoint, make it A508);
- **source** — against the forward source, when given: every stream ``src`` anchor found in
  the modeling file the model names (``source:``), see :mod:`archsql.source_guard`.

The checkpoint is reconciled by the store's own views (``checkpoint_reconciliation``,
``checkpoint_totals``) in a temporary store, so the numbers here are the numbers a query sees.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from archsql.errors import (
    ArchsqlError,
    CheckpointError,
    ConfigError,
    EvaluationError,
    Issue,
    ShapeError,
    SpecError,
    did_you_mean,
)

GUARDS = ("analysis", "shape", "packing", "weight", "source")
# What a finding says is wrong, as data (callers map a kind, never a message's wording):
KINDS: dict[str, str] = {
    "analysis": "the spec cannot be evaluated",
    "shape_error": "tensors that cannot be joined (the evaluator's shape rules)",
    "storage_rule": "a storage rule that matches nothing or cannot be bound",
    "source": "a src: anchor not found in the forward source",
    "unreadable": "the checkpoint cannot be read",
    "unclaimed": "a file tensor no spec tensor claims",
    "missing": "a spec tensor the file does not have",
    "dtype": "a tensor stored in another dtype",
    "packed_elements": "a quantized part (packed data or scale sibling) with another element count",
    "elements": "an unquantized tensor with another element count",
    "transposed": "same element count, the same axes in another order",
    "reshaped": "same element count, other axis lengths",
    "bytes": "the byte totals differ (the final checksum)",
    "omitted_unmatched": "an omitted: part whose patterns match no checkpoint tensor",
}
MAX_HINTS = 50  # closest-name hints are computed for the first unclaimed/missing tensors only


@dataclass(frozen=True)
class Finding:
    """One reason a spec is not publishable."""

    guard: str  # analysis | shape | packing | weight | source
    kind: str  # what is wrong, one of KINDS
    location: str  # file:line:col $.path, or checkpoint file and tensor, or spec file and node
    message: str
    expected: str | None = None
    got: str | None = None
    hint: str | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind

    def render(self) -> str:
        text = f"[{self.guard}] {self.location}: {self.message}"
        parts = [f"{k} {v}" for k, v in (("expected", self.expected), ("got", self.got)) if v is not None]
        if parts:
            text += f" ({', '.join(parts)})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


def _from_issue(guard: str, kind: str, issue: Issue) -> Finding:
    location = issue.location() if (issue.file or issue.line is not None) else "<spec>"
    if issue.path:
        location = f"{location} {issue.path}"
    return Finding(guard, kind, location, issue.message, issue.expected, issue.got, issue.hint)


def validate(
    model: str | Path,
    checkpoint: str | Path | pa.Table | None = None,
    *,
    offline: bool = False,
    profile: str | None = None,
    library=None,
    revision: str | None = None,
    endpoint: str | None = None,
    sources: list[str | Path] | None = None,
    warnings: list | None = None,
) -> list[Finding]:
    """Errors of ``model`` (a catalog name or a model .yaml), reconciled against ``checkpoint``
    when given: a local path or Hub repo id (read with :func:`archsql.ingest.read_checkpoint`,
    ``offline`` from the local cache) or an already-read ``checkpoint_tensors`` table.
    ``profile`` reconciles a precision profile's storage instead of the spec's own.
    ``sources`` (files or folders holding the model's forward source) runs the source guard.
    ``warnings``: a list the evaluation's warnings (config keys the spec does not read) are
    appended to; they do not stop publication."""
    from archsql.evaluator import evaluate
    from archsql.evaluator.storage import NATIVE, bind_storage

    try:
        analysis = evaluate(model, library)
    except ShapeError as exc:
        return [_from_issue("shape", "shape_error", i) for i in exc.issues] or [
            Finding("shape", "shape_error", str(model), str(exc))
        ]
    except (SpecError, ConfigError, EvaluationError) as exc:
        return [_from_issue("analysis", "analysis", i) for i in exc.issues] or [
            Finding("analysis", "analysis", str(model), str(exc))
        ]
    if warnings is not None:
        warnings.extend(analysis.warnings)
    profile = profile or NATIVE
    try:
        binding = bind_storage(analysis, library, profile=profile)
    except SpecError as exc:
        return [_from_issue("analysis", "analysis", i) for i in exc.issues]
    errors = [_from_issue("packing", "storage_rule", i) for i in binding.issues]
    if sources is not None:
        from archsql.source_guard import check_sources

        spec = next(iter(analysis.walks.values())).program.model
        errors += [_from_issue("source", "source", i) for i in check_sources(spec, sources)]
    if checkpoint is None:
        return errors
    if isinstance(checkpoint, pa.Table):
        table = checkpoint
    else:
        from archsql.ingest import read_checkpoint

        try:
            table = read_checkpoint(checkpoint, offline=offline, revision=revision, endpoint=endpoint)
        except CheckpointError as exc:
            return errors + [_from_issue("weight", "unreadable", i) for i in exc.issues]
    spec = next(iter(analysis.walks.values())).program.model
    if spec.omitted:  # parts the spec declares it does not model: compared apart
        table, counted, _ = split_omitted(table, spec.omitted)
        for name, (n, size) in counted.items():
            if warnings is None:
                break
            w = spec.omitted[name].where
            # a checkpoint without the part (a text-only export of a vision model) is no error
            text = (
                f"{n:,} checkpoint tensors, {size:,} bytes left out of the comparison"
                if n
                else "matches no checkpoint tensor (a checkpoint without this part?)"
            )
            warnings.append(
                Issue(
                    f"omitted part '{name}' ({spec.omitted[name].reason}): {text}",
                    file=w.file,
                    line=w.line,
                    column=w.column,
                    path=w.path,
                )
            )
    tables = dict(analysis.tables)
    if profile != NATIVE:  # evaluate binds every shipped profile; this binding replaces its rows
        stored = tables["storage_tensors"]
        kept = stored.filter(pc.not_equal(stored["profile"], profile))
        tables["storage_tensors"] = pa.concat_tables([kept, binding.table])
    return errors + reconcile(tables, table, model=analysis.model, profile=profile)


def known_architectures(library=None) -> set[str]:
    """The ``architectures`` values the catalog's configs name (the Transformers classes whose
    checkpoints the catalog's specs describe)."""
    from archsql.evaluator.bind import load_config
    from archsql.schema.checks import Collector
    from archsql.specs import default_library

    library = library or default_library()
    known: set[str] = set()
    for name in library.catalog():
        spec = library.model(name)
        config = load_config(spec, library.configs_dir, Collector(str(spec.file)))
        values = config.get("architectures")
        if isinstance(values, list):
            known.update(v for v in values if isinstance(v, str))
    return known


def architecture_warnings(model: str | Path, library=None) -> list[Issue]:
    """Warnings (not publish errors: a new family's class is unknown until the catalog has
    one) for a config whose ``architectures`` names a class no catalog config names — often
    a typo, or a config that belongs to another model — with the closest known class."""
    from archsql.evaluator.bind import config_path, load_config
    from archsql.schema.checks import Collector
    from archsql.schema.spec import parse_model
    from archsql.specs import default_library

    library = library or default_library()
    try:
        spec, _ = parse_model(library.model_path(model))
    except ArchsqlError:
        return []  # the analysis guard reports the spec's own errors
    if spec is None or "config" not in spec.where:
        return []
    config = load_config(spec, library.configs_dir, Collector(str(spec.file)))
    if "architectures" not in config:
        return []
    where = str(config_path(spec, library.configs_dir))
    values = config["architectures"]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return [Issue("'architectures' must be a list of class names", file=where, path="$.architectures",
                      got=repr(values)[:80])]  # fmt: skip
    known = known_architectures(library)
    out = []
    for value in values:
        if value in known:
            continue
        names = sorted(known)
        shown = ", ".join(names[:12]) + (f", … ({len(names)} in all)" if len(names) > 12 else "")
        hint = did_you_mean(value, known)
        out.append(
            Issue(
                f"unknown architecture '{value}': no catalog model's config names it",
                file=where,
                path="$.architectures",
                hint=f"{hint + ' ' if hint else ''}known: {shown}",
            )
        )
    return out


def reconcile(
    tables: dict[str, pa.Table] | None,
    checkpoint: pa.Table,
    *,
    model: str,
    profile: str,
    store: Path | None = None,
) -> list[Finding]:
    """The weight, packing and shape errors of one checkpoint against one model's tables, read
    from the store views in a temporary store.  ``store``: a store that already holds the
    model's tables (``tables`` is then not written again; the checkpoint is added to it).
    Either way the store's derived tables are left stale and the two reconciliation views
    read live: computing every derived view of the model (its SOL and memory on every
    deployment and workload) only to read these took ~3/4 of a validation's CPU."""
    from archsql.store import write_store

    if store is not None:
        return _reconcile_in(store, checkpoint, model=model, profile=profile)
    with tempfile.TemporaryDirectory(prefix="archsql-validate-") as tmp:
        db = Path(tmp) / "validate.duckdb"
        write_store(db, tables, refresh_derived=False)
        return _reconcile_in(db, checkpoint, model=model, profile=profile)


def _reconcile_in(
    db: Path, checkpoint: pa.Table, *, model: str, profile: str, refresh_derived: bool = False
) -> list[Finding]:
    """Reconcile ``checkpoint`` in the store ``db`` that holds the model's tables."""
    from archsql.store import connect, write_checkpoint

    checkpoint_id = write_checkpoint(db, checkpoint, model=model, profile=profile, refresh_derived=refresh_derived)
    con = connect(db, read_only=True, derived=refresh_derived)  # derived tables left stale: the live views
    try:
        rows = con.execute(
            """
            select r.status, r.canonical_name, r.spec_name, r.file_name, r.file, r.uid, r.tensor, r.part,
                   r.scheme, r.rule, r.expected_dtype, r.actual_dtype, r.expected_shape, r.actual_shape,
                   r.expected_elements, r.actual_elements, r.expected_bytes, r.actual_bytes
            from checkpoint_reconciliation as r
            where r.checkpoint = ? and r.status != 'ok'
            order by r.status, r.canonical_name
            """,
            [checkpoint_id],
        ).fetchall()
        totals = con.execute(
            "select file_tensors, spec_tensors, expected_bytes, actual_bytes from checkpoint_totals where checkpoint = ?",
            [checkpoint_id],
        ).fetchone()
        spec_file = con.execute("select spec_file from models where model = ?", [model]).fetchone()[0]
    finally:
        con.close()
    return reconciliation_findings(rows, totals, checkpoint_id, spec_file)


_COLUMNS = (
    "status",
    "canonical_name",
    "spec_name",
    "file_name",
    "file",
    "uid",
    "tensor",
    "part",
    "scheme",
    "rule",
    "expected_dtype",
    "actual_dtype",
    "expected_shape",
    "actual_shape",
    "expected_elements",
    "actual_elements",
    "expected_bytes",
    "actual_bytes",
)


def _fmt(dtype, shape) -> str:
    return f"{dtype} {list(shape) if shape is not None else '?'}"


def reconciliation_findings(rows, totals, checkpoint: str, spec_file: str) -> list[Finding]:
    """The weight, shape and packing findings of reconciliation rows (``checkpoint_reconciliation``)
    and their byte totals (``checkpoint_totals``)."""
    records = [dict(zip(_COLUMNS, row, strict=True)) for row in rows]
    missing = [r["canonical_name"] for r in records if r["status"] == "missing"]
    unclaimed = [r["canonical_name"] for r in records if r["status"] == "unclaimed"]
    out: list[Finding] = []
    hints = 0

    def file_loc(r) -> str:
        where = checkpoint if checkpoint.endswith(str(r["file"])) else f"{checkpoint}/{r['file']}"
        return f"{where}: {r['file_name']}"

    def spec_loc(r) -> str:
        return f"{spec_file} {r['uid']}: {r['spec_name']}"

    for r in records:
        if r["status"] == "unclaimed":
            close = did_you_mean(r["canonical_name"], missing) if hints < MAX_HINTS and missing else None
            hints += 1
            out.append(
                Finding(
                    "weight",
                    "unclaimed",
                    file_loc(r),
                    "file tensor is claimed by no spec tensor",
                    got=_fmt(r["actual_dtype"], r["actual_shape"]),
                    hint=f"a spec tensor missing from the file is close — {close}"
                    if close
                    else "add the module to the spec (or a buffers: entry for a saved non-parameter tensor)",
                )
            )
        elif r["status"] == "missing":
            close = did_you_mean(r["canonical_name"], unclaimed) if hints < MAX_HINTS and unclaimed else None
            hints += 1
            what = r["tensor"] if r["part"] in ("data", "buffer") else f"{r['part']} of {r['tensor']}"
            out.append(
                Finding(
                    "weight",
                    "missing",
                    spec_loc(r),
                    f"spec tensor ({what}, scheme {r['scheme']}) is not in the checkpoint",
                    expected=_fmt(r["expected_dtype"], r["expected_shape"]),
                    hint=f"an unclaimed file tensor is close — {close}"
                    if close
                    else f"check the node's path and the quant rule ({r['rule']})",
                )
            )
        else:
            out += _mismatch(r, file_loc(r))
    if totals is not None:
        file_tensors, spec_tensors, expected_bytes, actual_bytes = totals
        if expected_bytes != actual_bytes:
            out.append(
                Finding(
                    "weight",
                    "bytes",
                    checkpoint,
                    f"total bytes differ by {actual_bytes - expected_bytes:+,} "
                    f"({file_tensors:,} file tensors, {spec_tensors:,} spec tensors)",
                    expected=f"{expected_bytes:,} bytes",
                    got=f"{actual_bytes:,} bytes",
                    hint="the per-tensor errors above say where",
                )
            )
    return out


def _mismatch(r, location: str) -> list[Finding]:
    """A tensor on both sides that differs: dtype and element count are separate errors."""
    out = []
    quantized = r["scheme"] != "none" or r["part"] not in ("data", "buffer")
    rule = f"rule {r['rule']} chose scheme {r['scheme']}"
    if r["expected_dtype"] != r["actual_dtype"]:
        out.append(
            Finding(
                "packing",
                "dtype",
                location,
                f"stored dtype differs ({r['part']} of {r['tensor']}, node {r['uid']})",
                expected=r["expected_dtype"],
                got=r["actual_dtype"],
                hint=f"{rule}; fix the quant_context (dtype, roles, overrides) or the scheme's dtype",
            )
        )
    if r["expected_elements"] != r["actual_elements"]:
        out.append(
            Finding(
                "packing" if quantized else "weight",
                "packed_elements" if quantized else "elements",
                location,
                f"stored element count differs ({r['part']} of {r['tensor']}, node {r['uid']})",
                expected=f"{r['expected_elements']:,} = {list(r['expected_shape'])}",
                got=f"{r['actual_elements']:,} = {list(r['actual_shape'])}",
                hint=f"{rule}: check its packing and sibling shapes"
                if quantized
                else "check the node's dims bindings against config.json",
            )
        )
    elif list(r["expected_shape"]) != list(r["actual_shape"]):
        transposed = sorted(r["expected_shape"]) == sorted(r["actual_shape"])
        out.append(
            Finding(
                "shape",
                "transposed" if transposed else "reshaped",
                location,
                f"tensor cannot be joined: same element count, different shape ({r['part']} of {r['tensor']}, node {r['uid']})",
                expected=str(list(r["expected_shape"])),
                got=str(list(r["actual_shape"])),
                hint="the same axes in another order: a transposed weight, or in/out dims bound the wrong way round"
                if transposed
                else "other axis lengths with the same product: dims bound to the wrong config keys",
            )
        )
    return out


def part_indices(omitted: dict, names: list[str]) -> dict[str, list[int]]:
    """Omitted part name → the indices of ``names`` its patterns match (a name goes to the
    first part that matches it); ``omitted``: a spec's ``omitted:`` parts."""
    out: dict[str, list[int]] = {p: [] for p in omitted}
    for i, name in enumerate(names):
        part = next((p for p in omitted.values() if p.matches(name)), None)
        if part is not None:
            out[part.name].append(i)
    return out


def split_omitted(checkpoint: pa.Table, omitted: dict) -> tuple[pa.Table, dict[str, tuple[int, int]], list[Finding]]:
    """The checkpoint rows no omitted part matches (what the spec is compared with), each part's
    (tensors, bytes) left out, and a finding per part that matches no tensor."""
    names = checkpoint.column("name").to_pylist()
    sizes = pc.subtract(checkpoint["offset_end"], checkpoint["offset_begin"]).to_pylist()
    counted, findings, left_out = {}, [], set()
    for name, hits in part_indices(omitted, names).items():
        left_out.update(hits)
        counted[name] = (len(hits), sum(sizes[i] for i in hits))
        if not hits:
            part = omitted[name]
            w = part.where
            findings.append(
                Finding(
                    "weight",
                    "omitted_unmatched",
                    f"{w.file}:{w.line}:{w.column} {w.path}",
                    f"omitted part '{name}' matches no checkpoint tensor",
                    expected=f"a tensor name matching {', '.join(part.tensors) or '(no pattern)'}",
                    hint="write the patterns against the checkpoint's own names, or remove the part",
                )
            )
    kept = checkpoint.filter(pa.array([i not in left_out for i in range(len(names))])) if left_out else checkpoint
    return kept, counted, findings


def publishable(errors: list[Finding]) -> bool:
    return not errors


__all__ = [
    "GUARDS",
    "KINDS",
    "ArchsqlError",
    "Finding",
    "architecture_warnings",
    "known_architectures",
    "publishable",
    "reconcile",
    "validate",
]
