"""How a store is started and written without work that changes nothing:

- a new store is a copy of the empty store (archsql.store._copy_empty_store), cached per
  content of what it holds; it must answer exactly as a store created in place, and a changed
  default parameter row must give another empty store, never the cached one;
- a write to a store whose views stand (every table there, the recorded view SQL equal to the
  files') does not create the views again; one whose recorded SQL differs does;
- write_checkpoints writes a batch in one transaction: all of it or none;
- $ARCHSQL_THREADS sets DuckDB's worker threads on every archsql connection, and a value
  that is not a number of threads is a located error naming the variable.

Ground truth is the store created in place (the path every store took before), compared row
by row, floats to 1e-12 relative (DuckDB sums in parallel: the last bits may move)."""

from __future__ import annotations

import dataclasses
import shutil

import duckdb
import pyarrow as pa
import pytest

import archsql.store
from archsql import api
from archsql.errors import StoreError
from archsql.store import connect, freshness, write_checkpoints
from tests.test_derived import _same  # floats to 1e-12 relative

MODEL = "Qwen3-0.6B"
ANSWERS = (
    "select * from model_summary",
    "select * from step_sol",
    "select * from device_memory",
    "select * from kv_per_token",
)


def _rows(db, sql):
    with connect(db) as con:
        return sorted(con.execute(sql).fetchall(), key=repr)


def test_a_store_copied_from_the_empty_store_answers_as_one_created_in_place(store_of, tmp_path, monkeypatch):
    copied = store_of(MODEL)  # built in this run's cache: a copy of the empty store
    cache = archsql.store._cache_folder()
    assert list(cache.glob("empty-store-*.duckdb")), "the run's builds start from the empty store"
    assert _rows(copied, "select models from store_meta") == [([MODEL],)]  # its own build only
    # a cache folder that cannot be made (its parent is a file): the store is created in place
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("ARCHSQL_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    in_place = tmp_path / "in-place.duckdb"
    api.build([MODEL], db=in_place)
    with connect(in_place) as con:
        assert freshness(con).fresh
    for sql in ANSWERS:
        got, want = _rows(copied, sql), _rows(in_place, sql)
        assert got and len(got) == len(want), sql
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), sql


def test_what_an_empty_store_holds_is_its_key(monkeypatch):
    """The empty store is cached under a digest of what a later write keeps as it finds it:
    one default workload fewer, or one view's SQL changed, gives another key (then another
    empty store is written from the defaults and views as they are now)."""
    before = archsql.store._empty_store_key()
    defaults = archsql.store._DEFAULTS["workloads"]()
    monkeypatch.setitem(archsql.store._DEFAULTS, "workloads", lambda: defaults.slice(1))
    fewer = archsql.store._empty_store_key()
    assert fewer != before
    monkeypatch.undo()
    assert archsql.store._empty_store_key() == before
    files = archsql.store.view_files()
    changed = [dataclasses.replace(files[0], sql=files[0].sql + " "), *files[1:]]
    monkeypatch.setattr(archsql.store, "view_files", lambda: changed)
    assert archsql.store._empty_store_key() not in {before, fewer}


def test_a_write_creates_the_views_only_when_their_sql_is_not_the_files(store_of, tmp_path, monkeypatch):
    """A write of nothing (``write_store(db, {})``) to a sound store leaves its views; after the
    recorded SQL of one view is changed, the same write creates them again."""
    db = tmp_path / "store.duckdb"
    shutil.copy(store_of(MODEL), db)
    created = []
    real = archsql.store.create_views
    monkeypatch.setattr(archsql.store, "create_views", lambda con: created.append(1) or real(con))
    archsql.store.write_store(db, {})
    assert created == []  # every table there, the views' SQL the files': they stand
    with duckdb.connect(str(db)) as con:  # a view recorded as created from other SQL
        con.execute("update derived.sources set sql_md5 = 'other' where kind = 'view' and name = 'step_sol'")
    archsql.store.write_store(db, {})
    assert created == [1]
    with connect(db) as con:
        assert freshness(con).fresh


def _checkpoint(name: str, rows: int = 2) -> pa.Table:
    from tests.test_reconciliation import header_table

    return header_table({f"t{i}.weight": ("BF16", [4, 4]) for i in range(rows)}, name)


def test_write_checkpoints_writes_all_of_a_batch_or_none(store_of, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(store_of(MODEL), db)
    with pytest.raises(StoreError, match=r"model 'Qwen3-0\.6b' is not in the store"):
        write_checkpoints(db, [(_checkpoint("a"), MODEL, "native"), (_checkpoint("b"), "Qwen3-0.6b", "native")])
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select count(*) from checkpoint_tensors").fetchone() == (0,)
    assert write_checkpoints(db, [(_checkpoint("a"), MODEL, "native"), (_checkpoint("b", 3), MODEL, "native")]) == [
        "a",
        "b",
    ]
    with connect(db) as con:
        assert freshness(con).fresh  # the derived rows computed after the batch
        totals = con.execute("select checkpoint, file_tensors from checkpoint_totals order by 1").fetchall()
    assert totals == [("a", 2), ("b", 3)]


def test_archsql_threads_sets_duckdb_threads_and_a_bad_value_says_so(store_of, monkeypatch):
    db = store_of(MODEL)
    monkeypatch.setenv("ARCHSQL_THREADS", "3")
    with connect(db) as con:
        assert con.execute("select current_setting('threads')").fetchone() == (3,)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("ARCHSQL_THREADS", bad)
        with pytest.raises(StoreError, match=f"ARCHSQL_THREADS='{bad}' is not a number of threads"):
            connect(db)
