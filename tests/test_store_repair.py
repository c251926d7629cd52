"""A damaged store, or one written by another archsql, is brought back by `archsql build`
without losing what the user put in it (issue 19: "a repair path that rebuilds what is missing
without losing parameter tables; a real store version with migration").

The ground truth for "repaired" is the same store before it was damaged: after the repair every
model answers exactly what it answered then (a model left with zero FLOPs was the defect)."""

from __future__ import annotations

import shutil

import duckdb
import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import StoreError
from archsql.store import connect, keep_deployments, refresh

MODELS = ("Qwen3-0.6B", "Meta-Llama-3.1-8B")  # the store tests/test_cli.py reads too
ANSWER = """
    select model, workload, deployment, compute_s, memory_s, time_s
    from step_sol
    where deployment = '1xH200-single' and workload in ('prefill_2k', 'decode_b1_c2k')
    order by all
"""
WORKLOAD = {"workload": "mine", "phase": "decode", "batch": 3, "new_tokens": 1, "context": 5000}


@pytest.fixture(scope="module")
def sound(store_of, tmp_path_factory):
    """The two-model store cut to the deployment and workloads ANSWER reads, its derived rows
    computed: a repair computes every derived row again, over this grid, not the whole one."""
    path = tmp_path_factory.mktemp("sound") / "store.duckdb"
    shutil.copy(store_of(*MODELS), path)
    with duckdb.connect(str(path)) as con:
        keep_deployments(con, ["1xH200-single"])
        con.execute("delete from workloads where workload not in ('prefill_2k', 'decode_b1_c2k')")
        refresh(con)
    return path


@pytest.fixture(scope="module")
def answers(sound):
    with connect(sound) as con:
        rows = con.execute(ANSWER).fetchall()
    assert {r[0] for r in rows} == set(MODELS) and all(r[3] > 0 for r in rows)
    return rows


@pytest.fixture
def db(sound, tmp_path):
    path = tmp_path / "store.duckdb"
    shutil.copy(sound, path)
    with duckdb.connect(str(path)) as con:  # the user's own row, which no repair may lose
        con.execute(
            "insert into workloads by name select * from (values ('mine', 'decode', 3, 1, 5000)) "
            "as t(workload, phase, batch, new_tokens, context)"
        )
    return path


def _answers(path):
    """The answers, floats to 1e-12 relative (a rebuilt table may sum in another order)."""
    with connect(path) as con:
        return [(*r[:3], *(pytest.approx(x, rel=1e-12) for x in r[3:])) for r in con.execute(ANSWER).fetchall()]


def _my_workload(path):
    with connect(path) as con:
        return con.execute("select * from workloads where workload = 'mine'").fetchall()


def test_a_store_missing_an_evaluated_table_is_repaired_by_building_one_model(db, answers):
    """Dropping `terms` (every FLOP term of every model) leaves an incomplete store; the reader
    is told to build, and a build of ONE model evaluates the other one again: both answer as
    before, and the user's workload is still there."""
    with duckdb.connect(str(db)) as con:
        con.execute("drop table terms")
    with pytest.raises(StoreError, match=r"(?s)incomplete .*missing tables: terms.*repair it"):
        connect(db)
    report = api.build(["Qwen3-0.6B"], db=db)
    assert report.repaired == ("Meta-Llama-3.1-8B",)
    assert _answers(db) == answers
    assert _my_workload(db) == [tuple(WORKLOAD.values())]


def test_an_evaluated_table_of_another_layout_is_written_again_for_every_model(db, answers):
    """`dims` with a column an older archsql wrote: readers are told to build (never to delete
    the file); the build writes the table again for both models."""
    with duckdb.connect(str(db)) as con:
        con.execute("alter table dims add column legacy varchar")
    with pytest.raises(StoreError, match=r"(?s)another table layout .*'dims' has legacy.*archsql build") as err:
        connect(db)
    assert "delete" not in str(err.value)
    report = api.build(["Meta-Llama-3.1-8B"], db=db)
    assert report.repaired == ("Qwen3-0.6B",)
    assert _answers(db) == answers


def test_a_parameter_table_of_another_layout_is_migrated_keeping_its_rows(db, answers):
    """`workloads` as an older archsql might have had it: without `new_tokens`, with a column
    this one does not use.  The build saves it as CSV next to the store, copies the rows by
    column name (new_tokens starts empty), and says so; the check view then names the user's
    row as invalid (no new_tokens) instead of answering with a guess, while the default rows
    answer once the value is filled in again."""
    with duckdb.connect(str(db)) as con:
        con.execute("create temp table w as select workload, phase, batch, context, 'x' as note from workloads")
        con.execute("drop table workloads")
        con.execute("create table workloads as select * from w")
        before = con.execute("select workload, phase, batch, context from workloads order by all").fetchall()
    with pytest.raises(StoreError, match="'workloads' lacks new_tokens; has note that this archsql does not use"):
        connect(db)
    report = api.build(["Qwen3-0.6B"], db=db)
    assert report.repaired == ()  # no evaluated table was touched
    (note,) = report.notes
    assert "table 'workloads' lacks new_tokens" in note
    backup = next(db.parent.glob("store.duckdb.workloads.*.csv"))
    assert str(backup) in note
    with duckdb.connect() as con:
        saved = con.execute(f"select workload, phase, batch, context from read_csv('{backup}') order by all").fetchall()
    assert saved == before
    with connect(db, read_only=False) as con:
        kept = con.execute("select workload, phase, batch, context from workloads order by all").fetchall()
        assert kept == before
        assert con.execute("select count(*) from workloads where new_tokens is null").fetchall() == [(len(before),)]
        flagged = con.execute("select rule, problem from workload_checks where name = 'mine'").fetchall()
        assert ("new_tokens", "new_tokens null is below 1") in flagged
        # the user fills in the value the old layout did not have (from the defaults file: decode
        # rows add 1 token, prefill rows their whole context)
        con.execute("update workloads set new_tokens = case when phase = 'decode' then 1 else context end")
    api.refresh(db)
    assert _answers(db) == answers


def test_a_migration_that_cannot_hold_the_rows_changes_nothing(db):
    """`batch` holding text an integer column cannot take: a located error that names the saved
    CSV, and the store keeps its old table (the transaction is rolled back)."""
    with duckdb.connect(str(db)) as con:
        con.execute("create temp table w as select * replace (batch::varchar as batch) from workloads")
        con.execute("update w set batch = 'three' where workload = 'mine'")
        con.execute("drop table workloads")
        con.execute("create table workloads as select * from w")
    with pytest.raises(StoreError, match=r"'workloads' .*cannot be brought to the layout") as err:
        api.build(["Qwen3-0.6B"], db=db)
    assert any("saved in" in i.message for i in err.value.issues)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select batch from workloads where workload = 'mine'").fetchall() == [("three",)]


def test_a_stored_model_whose_spec_is_gone_is_named_not_dropped(db):
    """A model built from a spec file that no longer exists cannot be evaluated again: the
    repair refuses before writing anything, naming it."""
    with duckdb.connect(str(db)) as con:
        con.execute(
            "update models set model = 'my-model', spec_file = '/nowhere/my.yaml' where model = 'Meta-Llama-3.1-8B'"
        )
        con.execute("update dims set model = 'my-model' where model = 'Meta-Llama-3.1-8B'")
        con.execute("drop table terms")
    with pytest.raises(StoreError, match="spec of my-model cannot be found"):
        api.build(["Qwen3-0.6B"], db=db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select count(*) from models where model = 'my-model'").fetchall() == [(1,)]


def test_the_cli_says_what_it_repaired(db):
    with duckdb.connect(str(db)) as con:
        con.execute("drop table caches")
    result = CliRunner().invoke(cli, ["--db", str(db), "build", "Qwen3-0.6B"])
    assert result.exit_code == 0, result.output
    assert "repaired the store: evaluated again 1 model it holds (Meta-Llama-3.1-8B)" in " ".join(result.output.split())


def test_a_reference_table_of_another_layout_is_written_again(db, answers):
    """`fusion_rules` (written from code on every build) with a column an older archsql had:
    readers are told to build, and the build writes it again in this layout, keeping every
    model (no repair: the evaluated tables are sound)."""
    with duckdb.connect(str(db)) as con:
        con.execute("alter table fusion_rules add column legacy varchar")
    with pytest.raises(StoreError, match=r"(?s)another table layout .*'fusion_rules' has legacy"):
        connect(db)
    report = api.build(["Qwen3-0.6B"], db=db)
    assert report.repaired == () and report.notes == ()
    with connect(db) as con:
        assert "legacy" not in {c for (c, *_) in con.execute("describe fusion_rules").fetchall()}
        assert con.execute("select count(*) from fusion_rules").fetchone()[0] > 0
    assert _answers(db) == answers
