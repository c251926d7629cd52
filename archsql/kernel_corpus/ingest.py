"""Validated, idempotent, append-only ingest: the one path every source goes through.

An importer (aiconfigurator tables, a CSV or Parquet file, a harness run) stages rows in
the ``kernel_corpus`` columns — typed, dtype names as the source spells them, each row
located (``source_row``) — and hands them to :class:`CorpusWriter`, which, in one
transaction on the store:

1. skips a source version already imported (same ``source_hash``: source key + content);
2. checks every row (schema, registries, positive sizes and times, the fields its op kind
   needs) and rejects bad rows with their column and reason, keeping the good ones;
3. rejects repeated rows (same source, same signature and time: "duplicate of row N") and
   skips rows an earlier version of the same source already holds;
4. rejects rows whose implied throughput exceeds the GPU's peak (``int_kernel_corpus_work``:
   MFU, MBU or link utilization > 1 — usually a time in the wrong unit), with the numbers;
5. writes the kept rows of the batch as one Parquet partition, registers every source in
   ``kernel_corpus_sources`` and every problem in ``kernel_corpus_rejects`` (optionally
   also in a rejects CSV).

Nothing is lost silently: every row read is kept, rejected with reasons, or counted as
already present.  An import writes, then publishes: its partition file is written and
fsynced in a staging folder, renamed into the corpus folder, and only then does the
transaction registering its sources commit — the commit is what makes the rows visible
(``kernel_corpus`` reads only files a committed source names).  A crash at any step leaves
the corpus and its sources agreeing; the next import removes the staging folder it left
(:data:`STEPS`, tests/test_corpus_crash.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from archsql import __version__
from archsql.errors import did_you_mean
from archsql.kernel_corpus.registry import DTYPE_NAMES, OP_KINDS, PHASES, dtype_names_table
from archsql.kernel_corpus.schema import CORPUS_SCHEMA, PROVENANCE, SIGNATURE, SOURCES_SCHEMA
from archsql.kernel_corpus.storage import (
    clean_staging,
    corpus_dir,
    fsync_dir,
    fsync_file,
    missing_partitions,
    open_corpus,
    staging_dir,
)

ISSUE_TYPE = "struct(field varchar, reason varchar, value varchar)[]"
_INT_COLUMNS = [f.name for f in CORPUS_SCHEMA if pa.types.is_integer(f.type) and f.name not in PROVENANCE]
_MAY_BE_ZERO = {"window_size", "shared_experts", "index_topk"}
_REQUIRED_FIELDS = sorted({f for k in OP_KINDS for f in k.required})
_CHECK_FROM = """
    from {rows} as s
    left join __op_kinds as o on o.op_kind = s.op_kind
    left join (select distinct gpu from gpus) as g on g.gpu = s.gpu
    left join __dtype_names as d on d.name = s.dtype
    left join __dtype_names as dw on dw.name = s.weight_dtype
    left join __dtype_names as dk on dk.name = s.kv_dtype
"""
# "missing" is only reported for rows that staged cleanly: a value that did not parse is
# reported once, as itself, not again as the field it left empty.
_CLEAN = "coalesce(len(s.__issues), 0) = 0"
SAMPLE_REJECTS = 20
STEPS = ("before_write", "after_write", "after_publish", "after_commit", "before_cleanup")


def _step(name: str) -> None:
    """The import passes each of ``STEPS`` in order; a no-op, replaced by the crash-injection
    tests (tests/test_corpus_crash.py) to kill the process there."""


MEMORY_LIMIT = "4GB"  # located rejections a report keeps in memory (all are in the store)


@dataclass(frozen=True)
class Source:
    """One source version: a file, a package table, a harness run."""

    key: str  # stable across versions: 'aiconfigurator-core:<path>', 'file:<name>', ...
    name: str  # with version: 'aiconfigurator-core 0.12.0'
    content_sha256: str  # of the bytes (or rows) it holds
    origin: str  # aiconfigurator-core | file | archsql-bench
    location: str  # where it was read from
    environment: dict = field(default_factory=dict, compare=False)
    row_label: str = "row"  # how source_row reads in messages: 'line' (CSV) or 'row'
    # what, besides the bytes, makes two sources different: by default the key (aiconfigurator:
    # the same table under another GPU's folder measured another GPU).  A measurement file
    # says everything in its rows, so its scope is the origin alone: the same bytes under
    # another file name are the same source, imported once.
    scope: str | None = None

    @property
    def hash(self) -> str:
        """The source_hash: scope (default: key) and content together."""
        scope = self.key if self.scope is None else self.scope
        return hashlib.sha256(f"{scope}\0{self.content_sha256}".encode()).hexdigest()[:16]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class Outcome:
    source: Source
    status: str  # imported | already imported
    rows_read: int = 0
    rows_kept: int = 0
    rows_rejected: int = 0
    rows_already_present: int = 0
    note: str | None = None


@dataclass(frozen=True)
class Rejection:
    location: str
    source_row: int | None
    op_kind: str | None
    field: str | None
    reason: str
    value: str | None

    def render(self) -> str:
        where = self.location + (f":{self.source_row}" if self.source_row is not None else "")
        what = f" {self.field}" if self.field else ""
        got = f" (got {self.value!r})" if self.value is not None else ""
        return f"{where}{what}: {self.reason}{got}"


@dataclass
class IngestReport:
    db: Path
    outcomes: list[Outcome] = field(default_factory=list)
    reasons: list[tuple[str, str, int]] = field(default_factory=list)  # (field, reason, rows)
    sample: list[Rejection] = field(default_factory=list)
    rejects_file: Path | None = None
    seconds: float = 0.0
    unmapped: list[str] = field(default_factory=list)  # source tables no mapping covers (skipped whole)

    def total(self, attr: str) -> int:
        return sum(getattr(o, attr) for o in self.outcomes)

    @property
    def imported(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "imported"]

    @property
    def skipped(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status != "imported"]


class CorpusWriter:
    """One import into the store ``db``: a transaction, committed on a clean exit."""

    def __init__(self, db: str | Path, rejects_file: str | Path | None = None):
        self.db = Path(db)
        self.folder = corpus_dir(self.db)
        self.rejects_file = Path(rejects_file) if rejects_file else None
        self.report = IngestReport(self.db)
        self._t0 = time.perf_counter()
        self._staged_partitions: list[tuple[Path, Path]] = []
        self._published: list[Path] = []
        self.con: duckdb.DuckDBPyConnection | None = None

    # -- context ---------------------------------------------------------------------------

    def __enter__(self) -> CorpusWriter:
        self.con = open_corpus(self.db)
        clean_staging(self.folder)  # what a killed import left (it holds no row of the store)
        self._tmp = staging_dir(self.folder)
        self.con.begin()
        lost = [h for h, _ in missing_partitions(self.con, self.folder)]
        for table in ("kernel_corpus_rejects", "kernel_corpus_sources") if lost else ():
            self.con.execute(f"delete from {table} where source_hash in (select unnest($h))", {"h": lost})
        self._now = datetime.now(UTC).replace(tzinfo=None)
        self._setup_temp_tables()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Write, then publish: the partition files (written and fsynced while staging) are
        renamed into the corpus folder, then the transaction that registers their sources
        commits.  The commit is the one point where rows appear: ``kernel_corpus`` reads a
        file's rows only for sources a committed ``kernel_corpus_sources`` row places in that
        file, so a crash before it leaves an unreferenced file (replaced by the next import
        of the same sources, or registered by ``corpus sync``) and never a source without its
        file; a crash after it leaves only the staging folder, removed by the next import."""
        con = self.con
        assert con is not None
        committed = False
        try:
            if exc_type is not None:
                con.rollback()
                return
            self._summarize()
            self._publish()
            _step("after_publish")
            con.commit()
            committed = True
            _step("after_commit")
        finally:
            if not committed:
                for path in self._published:  # written by this import, referenced by no committed row
                    path.unlink(missing_ok=True)
            _step("before_cleanup")
            shutil.rmtree(self._tmp, ignore_errors=True)
            con.close()
            self.report.seconds = time.perf_counter() - self._t0

    def _publish(self) -> None:
        """Rename the staged partition files to their names in the corpus folder.  A file
        already there that a registered source names is kept (the same content hash: the
        same rows, written once); one no source names is what an import that did not commit
        left, and is replaced."""
        if not self._staged_partitions:
            return
        referenced = {
            r[0]
            for r in self.con.execute(
                "select distinct partition_file from kernel_corpus_sources where partition_file is not null "
                "and source_hash not in (select unnest($h))",
                {"h": [o.source.hash for o in self.report.imported]},
            ).fetchall()
        }
        for parent in {final.parent for _, final in self._staged_partitions}:
            parent.mkdir(parents=True, exist_ok=True)
        for staged, final in self._staged_partitions:
            if final.relative_to(self.folder).as_posix() in referenced and final.exists():
                staged.unlink()
                continue
            existed = final.exists()
            staged.replace(final)
            if not existed:
                self._published.append(final)
        for parent in {final.parent for _, final in self._staged_partitions}:
            fsync_dir(parent)

    # -- sources ---------------------------------------------------------------------------

    def new_sources(self, sources: Iterable[Source]) -> list[Source]:
        """The sources not imported yet; the others are reported as skipped.  A source whose
        partition file is missing from the corpus folder (deleted, or lost by a crash of an
        older archsql) is not imported: its registration is dropped and it is imported again."""
        sources = list(sources)
        known = {
            h: (key, when)
            for h, key, when in self.con.execute(
                "select source_hash, source_key, strftime(imported_at, '%Y-%m-%d %H:%M') from kernel_corpus_sources"
            ).fetchall()
        }
        fresh = []
        for s in sources:
            if s.hash in known:
                key, when = known[s.hash]
                as_key = f" as {key}" if key != s.key else ""
                self.report.outcomes.append(
                    Outcome(s, "already imported", note=f"same content imported{as_key} on {when} UTC")
                )
            else:
                fresh.append(s)
        return fresh

    def ingest(self, sources: Sequence[Source], stage: str | pa.Table) -> None:
        """Validate and append the rows of ``sources`` staged by ``stage`` (a SQL query or
        an Arrow table) with every kernel_corpus column plus ``__issues`` (problems found
        while staging, a list of (column, reason, value) or null) and ``__note`` (how the
        source states its time, for messages)."""
        con = self.con
        if not sources:
            return
        con.register(
            "__archsql_src",
            pa.table(
                {
                    "source_hash": [s.hash for s in sources],
                    "source_key": [s.key for s in sources],
                    "location": [s.location for s in sources],
                    "row_label": [s.row_label for s in sources],
                }
            ),
        )
        con.execute("create or replace temp table __src as select * from __archsql_src")
        con.unregister("__archsql_src")
        if isinstance(stage, pa.Table):
            con.register("__archsql_stage", stage)
            con.execute("create or replace temp table __staged as select * from __archsql_stage")
            con.unregister("__archsql_stage")
            stage = "select * from __staged"
        con.execute(f"create or replace temp view __s as {stage}")
        self._check()
        self._deduplicate()
        self._check_utilization()
        self._record(sources)

    # -- the steps -------------------------------------------------------------------------

    def _setup_temp_tables(self) -> None:
        con = self.con
        con.execute("set enable_progress_bar = false")
        con.execute(f"set memory_limit = '{MEMORY_LIMIT}'")  # a batch fits; DuckDB spills beyond
        con.register("__archsql_dtype_names", dtype_names_table())
        con.execute("create or replace temp table __dtype_names as select * from __archsql_dtype_names")
        con.unregister("__archsql_dtype_names")
        wide = {"op_kind": [k.name for k in OP_KINDS]}
        for f in _REQUIRED_FIELDS:
            wide[f"req_{f}"] = [f in k.required for k in OP_KINDS]
        con.register("__archsql_op_kinds", pa.table(wide))
        con.execute("create or replace temp table __op_kinds as select * from __archsql_op_kinds")
        con.unregister("__archsql_op_kinds")
        con.execute(
            "create or replace temp table __rejects "
            "(source_hash varchar, source_row bigint, op_kind varchar, field varchar, reason varchar, value varchar)"
        )

    def _check(self) -> None:
        """Schema and registry checks, in one pass over the staged rows.  ``__c``: the rows
        with canonical dtype names, whether they passed (``__ok``), a hash of source key,
        signature and time (``__h``) and the raw dtype names; ``__rejects``: every problem
        of the rows that did not pass (computed for those rows only)."""
        checks = _row_checks()
        bad = " or ".join(f"coalesce(({cond}), false)" for _, cond, _, _ in checks)
        signature = ", ".join(("source_key", *SIGNATURE))
        self.con.execute(
            f"""
            create or replace temp table __c as
            select *, hash({signature}) as __h
            from (
                select {_normalized_columns()},
                    not ({bad}) and coalesce(len(s.__issues), 0) = 0 as __ok,
                    s.__issues, s.__note,
                    s.dtype as __dtype_raw, s.weight_dtype as __weight_dtype_raw, s.kv_dtype as __kv_dtype_raw
                {_CHECK_FROM.format(rows="__s")}
            )
            """
        )
        issues = ",\n".join(
            f"case when coalesce(({cond}), false) then {{'field': '{col}', 'reason': {reason}, "
            f"'value': ({value})::varchar}} end"
            for col, cond, reason, value in checks
        )
        failed = (
            "(select * replace (__dtype_raw as dtype, __weight_dtype_raw as weight_dtype, "
            "__kv_dtype_raw as kv_dtype) from __c where not __ok)"
        )
        self.con.execute(
            f"""
            insert into __rejects
            select source_hash, source_row, op_kind, i.field, i.reason, i.value
            from (
                select s.source_hash, s.source_row, s.op_kind,
                    unnest(coalesce(s.__issues, []::{ISSUE_TYPE})
                        || list_filter([{issues}], lambda x: x is not null)) as i
                {_CHECK_FROM.format(rows=failed)}
            )
            """
        )

    def _kept(self) -> str:
        """The WHERE clause selecting the rows of ``__c as c`` to append."""
        if self.con.execute("select count(*) from __drop").fetchall()[0][0] == 0:
            return "where c.__ok"
        return (
            "where c.__ok and not exists (select 1 from __drop as d where d.source_hash = c.source_hash "
            "and d.source_row = c.source_row and d.op_kind = c.op_kind)"
        )

    def _deduplicate(self) -> None:
        """``__drop``: rows that passed but are not appended — a repeat of an earlier row of
        the same source (rejected: "duplicate of row N"), or a row an earlier version of
        the same source already holds (``present``).  Rows compare by ``__h`` (64 bits:
        equal hashes of unequal rows within one import are vanishingly rare)."""
        con = self.con
        con.execute(
            """
            create or replace temp table __drop as
            select c.source_hash, c.source_row, c.op_kind, false as present,
                'duplicate of ' || l.row_label || ' ' || f.first_row as reason
            from __c as c
            join (
                select __h, min(source_row) as first_row from __c where __ok group by __h having count(*) > 1
            ) as f on f.__h = c.__h
            join __src as l on l.source_hash = c.source_hash
            where c.__ok and c.source_row <> f.first_row
            """
        )
        con.execute("insert into __rejects select source_hash, source_row, op_kind, null, reason, null from __drop")
        earlier = [
            k
            for (k,) in con.execute(
                "select distinct source_key from kernel_corpus_sources where source_key in (select source_key from __src)"
            ).fetchall()
        ]
        if earlier:
            signature = ", ".join(("source_key", *SIGNATURE))
            con.execute(
                f"""
                insert into __drop
                select c.source_hash, c.source_row, c.op_kind, true, null
                from __c as c {self._kept()} and c.__h in (
                    select hash({signature}) from kernel_corpus where source_key in (select unnest($k))
                )
                """,
                {"k": earlier},
            )

    def _check_utilization(self) -> None:
        """Reject rows whose implied MFU, MBU or link utilization exceeds 1.  The numbers
        come from the view ``int_kernel_corpus_work`` itself — the one place they are
        computed — run over the candidate rows: a temporary view ``base_kernel_corpus``
        (the rows about to be kept) shadows the stored one while the check runs."""
        con = self.con
        cols = ", ".join(CORPUS_SCHEMA.names)
        con.execute(f"create or replace temp view base_kernel_corpus as select {cols} from __c as c {self._kept()}")
        try:
            con.execute(
                """
                create or replace temp table __over as
                select source_hash, source_row, op_kind, gpu, dtype, latency_us, flops, hbm_bytes, link_bytes,
                    peak_flops_per_s, hbm_bytes_per_s, link_bytes_per_s, mfu, mbu, link_util
                from int_kernel_corpus_work
                where mfu > 1 or mbu > 1 or link_util > 1
                """
            )
        finally:
            con.execute("drop view temp.base_kernel_corpus")
        if not con.execute("select count(*) from __over").fetchall()[0][0]:
            return
        con.execute(
            """
            insert into __rejects
            select o.source_hash, o.source_row, o.op_kind, 'latency_us',
                array_to_string(list_filter([
                    case when o.mfu > 1 then printf(
                        'implied MFU %.3g > 1: %.4g FLOP in %.4g us is %.4g FLOP/s, above the %s %s peak of %.4g FLOP/s',
                        o.mfu, o.flops, o.latency_us, o.flops / (o.latency_us * 1e-6), o.gpu, o.dtype,
                        o.peak_flops_per_s)
                    end,
                    case when o.mbu > 1 then printf(
                        'implied MBU %.3g > 1: %.4g bytes in %.4g us is %.4g B/s, above the %s memory bandwidth of %.4g B/s',
                        o.mbu, o.hbm_bytes, o.latency_us, o.hbm_bytes / (o.latency_us * 1e-6), o.gpu, o.hbm_bytes_per_s)
                    end,
                    case when o.link_util > 1 then printf(
                        'implied link use %.3g > 1: %.4g bytes per rank in %.4g us is %.4g B/s, above the %s link of %.4g B/s',
                        o.link_util, o.link_bytes, o.latency_us, o.link_bytes / (o.latency_us * 1e-6), o.gpu,
                        o.link_bytes_per_s)
                    end
                ], lambda x: x is not null), '; ')
                || case
                    when greatest(o.mfu, o.mbu, o.link_util) >= 100
                        then coalesce('; is the time in the unit it claims (' || c.__note || ')?', '')
                    else '; faster than the hardware allows: operands reused from on-chip cache between '
                        || 'repetitions, or a shape or dtype that is not what ran'
                end,
                printf('%.6g', o.latency_us)
            from __over as o
            join __c as c on c.source_hash = o.source_hash and c.source_row = o.source_row and c.op_kind = o.op_kind
            """
        )
        con.execute("insert into __drop select source_hash, source_row, op_kind, false, 'over peak' from __over")

    def _record(self, sources: Sequence[Source]) -> None:
        con = self.con
        read = dict(con.execute("select source_hash, count(*) from __c group by source_hash").fetchall())
        kept = dict(con.execute(f"select source_hash, count(*) from __c as c {self._kept()} group by all").fetchall())
        present = dict(
            con.execute("select source_hash, count(*) from __drop where present group by source_hash").fetchall()
        )
        rejected = dict(
            con.execute(
                "select source_hash, count(distinct (source_row, op_kind)) from __rejects group by source_hash"
            ).fetchall()
        )
        self._hint_unknown_names()
        partition = self._write_partition(sources)
        rows = {}
        for s in sources:
            outcome = Outcome(
                s, "imported", read.get(s.hash, 0), kept.get(s.hash, 0), rejected.get(s.hash, 0), present.get(s.hash, 0)
            )
            self.report.outcomes.append(outcome)
            rows[s.hash] = {
                "source_key": s.key,
                "source": s.name,
                "source_hash": s.hash,
                "origin": s.origin,
                "location": s.location,
                "partition_file": partition if outcome.rows_kept else None,
                "rows_read": outcome.rows_read,
                "rows_kept": outcome.rows_kept,
                "rows_rejected": outcome.rows_rejected,
                "rows_already_present": outcome.rows_already_present,
                "imported_at": self._now,
                "archsql_version": __version__,
                "environment": json.dumps(s.environment, sort_keys=True) if s.environment else None,
            }
        con.register("__archsql_sources", pa.Table.from_pylist(list(rows.values()), schema=SOURCES_SCHEMA))
        con.execute("insert into kernel_corpus_sources select * from __archsql_sources")
        con.unregister("__archsql_sources")
        con.execute(
            """
            insert into kernel_corpus_rejects
            select l.source_key, r.source_hash, l.location, r.source_row, r.op_kind, r.field, r.reason, r.value, $now
            from __rejects as r join __src as l on l.source_hash = r.source_hash
            """,
            {"now": self._now},
        )
        con.execute("delete from __rejects")

    def _write_partition(self, sources: Sequence[Source]) -> str | None:
        """Write the kept rows of this batch as one Parquet file in the import's temporary
        folder (renamed into the corpus folder just before the commit); returns its path in
        the folder."""
        kept = self.con.execute(f"select count(*) from __c as c {self._kept()}").fetchall()[0][0]
        if not kept:
            return None
        _step("before_write")
        batch = hashlib.sha256("\0".join(sorted(s.hash for s in sources)).encode()).hexdigest()[:16]
        rel = f"{sources[0].origin}/{batch}.parquet"
        staged = self._tmp / "staged" / rel.replace("/", "-")
        staged.parent.mkdir(parents=True, exist_ok=True)
        cols = ", ".join(CORPUS_SCHEMA.names)
        # rows in staging order (source by source, row by row); pyarrow writes Parquet
        # several times faster than DuckDB's COPY for these wide, mostly-null rows
        reader = self.con.sql(f"select {cols} from __c as c {self._kept()}").to_arrow_reader(1 << 17)
        with pq.ParquetWriter(staged, CORPUS_SCHEMA, compression="zstd") as out:
            for batch in reader:
                out.write_table(pa.Table.from_batches([batch]).cast(CORPUS_SCHEMA))
        fsync_file(staged)  # on disk before any row of the store names it
        self._staged_partitions.append((staged, self.folder / rel))
        _step("after_write")
        return rel

    def _hint_unknown_names(self) -> None:
        """Add "did you mean" to the rejections of unknown registry names (few values)."""
        con = self.con
        choices = {
            "op_kind": [k.name for k in OP_KINDS],
            "gpu": [r[0] for r in con.execute("select gpu from gpus").fetchall()] + ["cpu"],
            "dtype": list(DTYPE_NAMES),
            "weight_dtype": list(DTYPE_NAMES),
            "kv_dtype": list(DTYPE_NAMES),
            "phase": list(PHASES),
        }
        unknown = con.execute(
            "select distinct field, value from __rejects where reason like 'unknown %' and value is not null"
        ).fetchall()
        for column, value in unknown:
            hint = did_you_mean(value, choices.get(column, ()))
            if hint:
                con.execute(
                    "update __rejects set reason = reason || '; ' || $hint "
                    "where field = $c and value = $v and reason like 'unknown %'",
                    {"hint": hint, "c": column, "v": value},
                )

    def _summarize(self) -> None:
        con = self.con
        hashes = [o.source.hash for o in self.report.imported]
        if not hashes:
            return
        self.report.reasons = [
            (col or "", reason, n)
            for col, reason, n in con.execute(
                """
                select field, regexp_replace(reason, '(^|[^A-Za-z0-9_])[0-9][0-9.e+-]*', '\\1#', 'g') as kind, count(*)
                from kernel_corpus_rejects where source_hash in (select unnest($h))
                group by all order by 3 desc, 1, 2
                """,
                {"h": hashes},
            ).fetchall()
        ]
        self.report.sample = [
            Rejection(*row)
            for row in con.execute(
                f"""
                select location, source_row, op_kind, field, reason, value
                from kernel_corpus_rejects where source_hash in (select unnest($h))
                order by location, source_row limit {SAMPLE_REJECTS}
                """,
                {"h": hashes},
            ).fetchall()
        ]
        if self.rejects_file is not None:
            self.rejects_file.parent.mkdir(parents=True, exist_ok=True)
            quoted = str(self.rejects_file).replace("'", "''")
            con.execute(
                f"""
                copy (
                    select location, source_row, op_kind, field, reason, value, source_key, source_hash
                    from kernel_corpus_rejects where source_hash in (select unnest($h))
                    order by location, source_row, op_kind
                ) to '{quoted}' (header, delimiter ',')
                """,
                {"h": hashes},
            )
            self.report.rejects_file = self.rejects_file


# -- the checks, as SQL over ``__s as s`` joined with the registries ------------------------


def _row_checks() -> list[tuple[str, str, str, str]]:
    """(column, condition true for a bad row, reason, offending value) — every row check."""
    checks: list[tuple[str, str, str, str]] = [
        ("op_kind", "s.op_kind is null", "'missing: what was measured'", "null"),
        ("op_kind", "s.op_kind is not null and o.op_kind is null", "'unknown op kind'", "s.op_kind"),
        ("gpu", "s.gpu is null", "'missing: where it ran (a gpus.gpu or cpu)'", "null"),
        (
            "gpu",
            "s.gpu is not null and g.gpu is null and s.gpu <> 'cpu'",
            "'unknown GPU: not in the gpus table (archsql/gpus/gpus.csv)'",
            "s.gpu",
        ),
        ("library", "s.library is null", "'missing: the library or framework it ran through'", "null"),
        ("dtype", "s.dtype is not null and d.name is null", "'unknown dtype'", "s.dtype"),
        ("weight_dtype", "s.weight_dtype is not null and dw.name is null", "'unknown dtype'", "s.weight_dtype"),
        ("kv_dtype", "s.kv_dtype is not null and dk.name is null", "'unknown dtype'", "s.kv_dtype"),
        ("phase", f"s.phase not in {PHASES!r}", f"'unknown phase (expected one of {', '.join(PHASES)})'", "s.phase"),
        ("latency_us", f"s.latency_us is null and {_CLEAN}", "'missing: no time'", "null"),
        (
            "latency_us",
            "not isfinite(s.latency_us) or s.latency_us <= 0",
            "'a time must be a positive, finite number'",
            "s.latency_us",
        ),
        ("power_w", "not isfinite(s.power_w) or s.power_w < 0", "'power must be a non-negative number'", "s.power_w"),
        ("kv_len", "s.kv_len < s.q_len", "'kv_len (tokens attended) is below q_len (new tokens)'", "s.kv_len"),
        (
            "check_status",
            "s.check_status not in ('passed', 'not_checked', 'failed')",
            "'unknown check status (expected passed or not_checked)'",
            "s.check_status",
        ),
        (
            "check_status",
            "s.check_status = 'failed'",
            "'output does not match the reference: error ' || coalesce(printf('%.3g', s.check_error), '?') "
            "|| ' > tolerance ' || coalesce(printf('%.3g', s.check_tolerance), '?')",
            "s.check_status",
        ),
    ]
    for name in _INT_COLUMNS:
        op = "<" if name in _MAY_BE_ZERO else "<="
        what = "non-negative" if name in _MAY_BE_ZERO else "positive"
        checks.append((name, f"s.{name} {op} 0", f"'must be {what}'", f"s.{name}"))
    for name in _REQUIRED_FIELDS:
        value = "d.dtype" if name == "dtype" else f"s.{name}"
        unknown_dtype = " and (s.dtype is null or d.name is not null)" if name == "dtype" else ""
        checks.append(
            (
                name,
                f"o.req_{name} and {value} is null{unknown_dtype} and {_CLEAN}",
                f"'missing: op kind ' || s.op_kind || ' needs {name}'",
                "null",
            )
        )
    return checks


def _normalized_columns() -> str:
    """kernel_corpus columns of ``__s as s`` with dtype names made canonical."""
    out = []
    for name in CORPUS_SCHEMA.names:
        if name == "dtype":
            out.append("coalesce(d.dtype, s.dtype) as dtype")
        elif name == "weight_dtype":
            out.append("coalesce(dw.dtype, s.weight_dtype, d.weight_dtype) as weight_dtype")
        elif name == "kv_dtype":
            out.append("coalesce(dk.dtype, s.kv_dtype) as kv_dtype")
        elif name == "quant":
            out.append("coalesce(s.quant, d.quant, dw.quant) as quant")
        elif name == "check_status":
            out.append("coalesce(s.check_status, 'not_checked') as check_status")
        else:
            out.append(f"s.{name}")
    return ", ".join(out)
