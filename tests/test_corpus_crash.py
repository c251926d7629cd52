"""Corpus import that cannot lose rows (issue 19, class 3: "corpus import can lose rows").

Before: the store committed the sources of an import before its Parquet partition was moved
into the corpus folder, so a crash between the two left ``kernel_corpus_sources`` claiming
rows in a file that did not exist; re-import was skipped ("already imported") and
``corpus sync`` could not recover.  A SIGKILL left its staging folder forever; the same bytes
under another file name imported again; a store moved together with its corpus folder
failed with "file system operations are disabled".

Now an import writes, then publishes (archsql.kernel_corpus.ingest.CorpusWriter): the
partition is written and fsynced in a staging folder, renamed into the corpus folder, then
the sources commit; ``kernel_corpus`` reads only files a committed source names.  Each test
kills a real import (a subprocess, SIGKILL at a step of ``ingest.STEPS``) or raises there,
then checks that the corpus and its sources agree and that a re-import or ``corpus sync``
brings back every row exactly once.

Ground truth, from the CSV below (H200 SXM: 989e12 dense BF16 FLOP/s, archsql/gpus/gpus.csv):
line 2, GEMM 1024³ in 50 µs: 2·1024³ = 2.147e9 FLOP → 4.29e13 FLOP/s, MFU 0.043;
line 3, GEMM 2048·1024·1024 in 100 µs: 4.295e9 FLOP → 4.29e13 FLOP/s, MFU 0.043;
line 4, GEMM 4096³ in 200 µs: 1.374e11 FLOP → 6.87e14 FLOP/s, MFU 0.695;
line 5: latency "abc", rejected.  So 4 rows read, 3 kept, 1 rejected.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.kernel_corpus import corpus_dir, import_files, ingest, open_corpus, sync

ROOT = Path(__file__).resolve().parents[1]
CSV = (
    "op_kind,gpu,library,library_version,kernel,dtype,m,n,k,latency_ms",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,1024,1024,1024,0.05",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,2048,1024,1024,0.1",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,4096,4096,4096,0.2",
    "gemm,H200 SXM,vllm,0.24.0,cutlass,bf16,4096,4096,2048,abc",
)
KEPT = 3  # lines 2-4
REJECTED = 1  # line 5
COMMITTED_AT = ingest.STEPS.index("after_commit")  # steps from here on happen after the commit

_CRASH = """
import os, signal, sys
from archsql.kernel_corpus import ingest
from archsql.kernel_corpus.files import import_files

def crash(name):
    if name == sys.argv[1]:
        os.kill(os.getpid(), signal.SIGKILL)

ingest._step = crash
import_files(sys.argv[2], [sys.argv[3]])
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("crash_template") / "store.duckdb"
    open_corpus(db).close()
    return db


def _fresh(template: Path, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.duckdb"
    shutil.copy(template, db)
    csv = folder / "sweep.csv"
    csv.write_text("\n".join(CSV) + "\n", encoding="utf-8")
    return db, csv


def _n(db: Path, sql: str) -> int:
    return api.query(sql, db=db).column(0)[0].as_py()


def _agreement(db: Path) -> tuple[int, int]:
    """(rows in kernel_corpus, sources) after checking that they agree: every claimed file
    exists, the rows are what the sources say they kept, and no row appears twice."""
    folder = corpus_dir(db)
    claimed = api.query("select partition_file from kernel_corpus_sources where partition_file is not null", db=db)
    for rel in claimed.column(0).to_pylist():
        assert (folder / rel).is_file(), f"kernel_corpus_sources claims rows in {rel}, which does not exist"
    rows = _n(db, "select count(*) from kernel_corpus")
    assert rows == _n(db, "select coalesce(sum(rows_kept), 0) from kernel_corpus_sources")
    assert rows == _n(db, "select count(distinct (source_hash, source_row, op_kind)) from kernel_corpus")
    return rows, _n(db, "select count(*) from kernel_corpus_sources")


def _staging(db: Path) -> list[Path]:
    return list(corpus_dir(db).glob(".import-*"))


def _kill_at(step: str, db: Path, csv: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-c", _CRASH, step, str(db), str(csv)], env=env, capture_output=True)
    assert run.returncode == -signal.SIGKILL, f"the import did not reach {step}: {run.stderr.decode()[-2000:]}"


# A real SIGKILL (a subprocess, ~10 s each) at the two steps that straddle the publication —
# the file written but not yet published, and published but not yet committed; every step is
# also crashed in-process below (test_an_exception_at_each_step_...).
SIGKILL_STEPS = ("after_write", "after_publish")


@pytest.mark.parametrize("step", SIGKILL_STEPS)
def test_sigkill_at_each_step_then_reimport_or_sync_brings_every_row_back_once(template, tmp_path, step):
    db, csv = _fresh(template, tmp_path / "a")
    _kill_at(step, db, csv)
    committed = ingest.STEPS.index(step) >= COMMITTED_AT
    # right after the crash: the corpus and its sources agree (all rows or none)
    assert _agreement(db) == ((KEPT, 1) if committed else (0, 0))
    if step != "before_write":
        assert _staging(db), "the killed import left its staging folder (the defect's 12 MB folders)"
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same crashed state, recovered the other way
    db_b = tmp_path / "b" / "store.duckdb"

    # recovery 1: import again
    (outcome,) = import_files(db, [csv]).outcomes
    assert outcome.status == ("already imported" if committed else "imported")
    assert _agreement(db) == (KEPT, 1)
    assert _n(db, "select sum(rows_rejected) from kernel_corpus_sources") == REJECTED
    assert _n(db, "select count(*) from kernel_corpus_rejects") == REJECTED
    assert _staging(db) == []  # the next run removed what the killed one left

    # recovery 2: corpus sync (registers a file published before the commit), then import
    counts = sync(db_b)
    assert counts["staging_removed"] == (0 if step == "before_write" else 1)
    assert counts["sources"] == (1 if step == "after_publish" else 0)
    assert _staging(db_b) == []
    import_files(db_b, [csv])
    assert _agreement(db_b) == (KEPT, 1)


@pytest.mark.parametrize("step", ingest.STEPS)
def test_an_exception_at_each_step_leaves_corpus_and_sources_agreeing(template, tmp_path, monkeypatch, step):
    db, csv = _fresh(template, tmp_path)

    def fail(name: str) -> None:
        if name == step:
            raise RuntimeError(f"injected at {name}")

    monkeypatch.setattr(ingest, "_step", fail)
    with pytest.raises(RuntimeError, match=f"injected at {step}"):
        import_files(db, [csv])
    committed = ingest.STEPS.index(step) >= COMMITTED_AT
    assert _agreement(db) == ((KEPT, 1) if committed else (0, 0))
    if not committed:  # nothing published is left behind
        assert list(corpus_dir(db).glob("file/*.parquet")) == []
    monkeypatch.undo()
    import_files(db, [csv])
    assert _agreement(db) == (KEPT, 1)


def test_sources_claiming_a_missing_file_are_repaired_by_reimport_and_by_sync(template, tmp_path):
    """The defect's state (an older archsql's crash between commit and move): sources name a
    partition file that is gone.  A re-import no longer skips it, and sync unregisters it."""
    for recover in ("reimport", "sync"):
        db, csv = _fresh(template, tmp_path / recover)
        import_files(db, [csv])
        (partition,) = corpus_dir(db).glob("file/*.parquet")
        partition.unlink()
        assert _n(db, "select count(*) from kernel_corpus") == 0
        if recover == "sync":
            assert sync(db)["unregistered"] == 1
            assert _agreement(db) == (0, 0)
        (outcome,) = import_files(db, [csv]).outcomes
        assert outcome.status == "imported"
        assert _agreement(db) == (KEPT, 1)
        assert _n(db, "select count(*) from kernel_corpus_rejects") == REJECTED  # not twice


def test_a_file_without_a_source_row_is_registered_by_sync(template, tmp_path):
    db, csv = _fresh(template, tmp_path)
    import_files(db, [csv])
    con = open_corpus(db)
    con.execute("delete from kernel_corpus_sources")
    con.close()
    assert _agreement(db) == (0, 0)  # an unregistered file holds no visible row
    assert sync(db)["sources"] == 1
    assert _agreement(db) == (KEPT, 1)
    (outcome,) = import_files(db, [csv]).outcomes
    assert outcome.status == "already imported"
    assert _agreement(db) == (KEPT, 1)


def test_the_same_bytes_under_another_name_import_once(template, tmp_path):
    db, csv = _fresh(template, tmp_path)
    copies = [csv, shutil.copy(csv, tmp_path / "copy.csv"), shutil.copy(csv, tmp_path / "renamed.csv")]
    report = import_files(db, copies)
    assert [o.status for o in report.outcomes] == ["imported", "already imported", "already imported"]
    assert "as file:sweep.csv" in report.outcomes[1].note
    assert _agreement(db) == (KEPT, 1)  # 3 rows, not 9
    import_files(db, [copies[2]])
    assert _agreement(db) == (KEPT, 1)


def test_a_moved_store_and_corpus_folder_answer_queries(template, tmp_path):
    db, csv = _fresh(template, tmp_path / "here")
    import_files(db, [csv])
    moved = tmp_path / "there" / "renamed.duckdb"
    moved.parent.mkdir()
    shutil.move(db, moved)
    shutil.move(corpus_dir(db), corpus_dir(moved))
    shutil.rmtree(tmp_path / "here")
    assert _agreement(moved) == (KEPT, 1)
    assert _n(moved, "select count(*) from kernel_measurements") == KEPT
    result = CliRunner().invoke(cli, ["--db", str(moved), "corpus", "summary", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "H200 SXM,gemm,vllm,0.24.0,3," in result.output
    result = CliRunner().invoke(cli, ["--db", str(moved), "sql", "select count(*) as n from kernel_corpus"])
    assert result.exit_code == 0, result.output
    assert "file system operations are disabled" not in result.output
    # and the moved store keeps importing idempotently
    again = tmp_path / "again.csv"
    again.write_text("\n".join(CSV) + "\n", encoding="utf-8")
    (outcome,) = import_files(moved, [again]).outcomes
    assert outcome.status == "already imported"


def test_a_copied_store_without_its_corpus_folder_says_no_rows(template, tmp_path):
    db, csv = _fresh(template, tmp_path / "a")
    import_files(db, [csv])
    lone = tmp_path / "lone.duckdb"
    shutil.copy(db, lone)
    assert _n(lone, "select count(*) from kernel_corpus") == 0
    assert sync(lone)["unregistered"] == 1
