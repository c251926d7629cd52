"""The read-only connection ``api.query`` holds open between queries (archsql.store_hold):
reused while the store file is unchanged, never a stale figure after any write.

Ground truth: the H200's HBM bandwidth, 4.8 TB/s on its data sheet (archsql/gpus/gpus.csv), is
set to 9.6 TB/s by each write below; ``int_gpu_specs.hbm_bytes_per_s`` (a derived table, read
through its shadow while current) must then read 9.6 TB/s = 9.6e12 B/s, never 4.8e12.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from archsql import api, store_hold
from archsql.store import connect

GPU = "H200 SXM"
FIGURE = f"select hbm_bytes_per_s from int_gpu_specs where gpu = '{GPU}' and dtype = 'bf16'"
BEFORE, AFTER = 4.8e12, 9.6e12  # B/s: 4.8 TB/s (data sheet), then doubled by the write
WRITE = f"update gpus set mem_bandwidth_TBps = 9.6 where gpu = '{GPU}'"


@pytest.fixture
def db(store_of, tmp_path):
    path = tmp_path / "store.duckdb"
    shutil.copy(store_of("Meta-Llama-3.1-8B"), path)
    yield path
    store_hold.release()


@pytest.fixture
def opens(monkeypatch):
    """Count the connections api.query opens."""
    count = []
    opener = api.query_connection

    def counting(path):
        count.append(path)
        return opener(path)

    monkeypatch.setattr(api, "query_connection", counting)
    return count


def _figure(db) -> float:
    (value,) = api.query(FIGURE, db=db).column(0).to_pylist()
    return value


def test_a_held_connection_answers_the_next_queries_until_released(db, opens, monkeypatch):
    monkeypatch.setenv(store_hold.HOLD_ENV, "60")
    assert [_figure(db) for _ in range(3)] == [BEFORE] * 3
    assert len(opens) == 1 and store_hold.held_paths() == [db.resolve()]
    api.release(db)
    assert store_hold.held_paths() == []
    duckdb.connect(str(db)).close()  # released: a writable connection of this process opens
    assert _figure(db) == BEFORE and len(opens) == 2


def test_holding_off_opens_every_time(db, opens, monkeypatch):
    monkeypatch.setenv(store_hold.HOLD_ENV, "0")
    assert [_figure(db) for _ in range(2)] == [BEFORE] * 2
    assert len(opens) == 2 and store_hold.held_paths() == []


def test_a_write_through_archsql_in_this_process_is_read_at_once(db, opens, monkeypatch):
    """store.connect (every archsql writer) lets the held connection go before it opens."""
    monkeypatch.setenv(store_hold.HOLD_ENV, "60")
    assert _figure(db) == BEFORE
    con = connect(db, read_only=False)
    con.execute(WRITE)
    con.close()
    assert _figure(db) == AFTER and len(opens) == 2


def test_a_write_by_another_process_is_read_after_it(db, opens, monkeypatch):
    """Another process's writer waits while the connection is held (DuckDB's file lock), gets
    the store once it is idle for the hold time, and the next query reads its write."""
    monkeypatch.setenv(store_hold.HOLD_ENV, "0.2")
    assert _figure(db) == BEFORE
    writer = f"""
import duckdb, time
deadline = time.monotonic() + 30
while True:
    try:
        con = duckdb.connect({str(db)!r})
        break
    except duckdb.IOException:  # locked by the held connection
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
con.execute({WRITE!r})
con.close()
"""
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=60)
    assert store_hold.held_paths() == []  # let go after 0.2 s idle
    assert _figure(db) == AFTER and len(opens) == 2


def test_a_store_file_replaced_under_a_held_connection_is_opened_again(db, opens, monkeypatch, tmp_path):
    """No lock stops a file being replaced (a copy renamed over it): the file's identity
    (inode, size, mtime) differs, so the next query opens the new file."""
    monkeypatch.setenv(store_hold.HOLD_ENV, "60")
    assert _figure(db) == BEFORE
    other = tmp_path / "other.duckdb"
    shutil.copy(db, other)
    with duckdb.connect(str(other)) as con:
        con.execute(WRITE)
    os.replace(other, db)
    assert _figure(db) == AFTER and len(opens) == 2


def test_the_held_connection_lets_go_when_idle(db, monkeypatch):
    monkeypatch.setenv(store_hold.HOLD_ENV, "0.1")
    assert _figure(db) == BEFORE
    deadline = time.monotonic() + 10
    while store_hold.held_paths() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store_hold.held_paths() == []


def test_threads_share_the_held_connection_one_query_at_a_time(db, opens, monkeypatch):
    monkeypatch.setenv(store_hold.HOLD_ENV, "60")
    _figure(db)
    got: list[float] = []

    def ask():
        got.extend(_figure(db) for _ in range(5))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [BEFORE] * 20 and len(opens) == 1


def test_a_failed_query_closes_the_held_connection(db, opens, monkeypatch):
    monkeypatch.setenv(store_hold.HOLD_ENV, "60")
    _figure(db)
    with pytest.raises(api.QueryError, match="no_such_view"):
        api.query("select * from no_such_view", db=db)
    assert store_hold.held_paths() == []
    assert _figure(db) == BEFORE and len(opens) == 2


def test_at_exit_no_idle_timer_is_left_running_duckdb(db):
    """The idle timers are daemon threads: one closing its connection while the interpreter
    finalizes is ended inside DuckDB's C++ frames, which aborts the process (exit 134). At
    exit every held connection is closed, every timer cancelled and waited for, and none
    starts after (a process that queries and exits at once, with the timer about to fire)."""
    script = f"""
import threading, time
from archsql import api, store_hold
api.query("select 1", db={str(db)!r})
assert store_hold.held_paths() and store_hold._TIMERS
store_hold._at_exit()
assert not store_hold.held_paths() and not store_hold._TIMERS
assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]
store_hold._schedule(None, None, 0.0)  # after exit began: no timer
assert not store_hold._TIMERS
api.query("select 1", db={str(db)!r})  # a query still answers (opened and closed at exit)
print("ok")
"""
    env = {**os.environ, "ARCHSQL_QUERY_HOLD_S": "0.02"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
