"""Read-only store connections held open between queries of one process.

Opening the full-catalog store costs ~30 ms of CPU (DuckDB loads its catalog of ~200 views
and macros), checking that its derived tables are current another ~30 ms and closing it
~13 ms, while the point query itself takes ~5 ms.  :func:`held` keeps the read-only
connection a caller opened (``api.query``: shadows made, file access locked down) and hands
it to the next call on the same store, for as long as the store's file is unchanged and
the connection is in use at least every ``ARCHSQL_QUERY_HOLD_S`` seconds (default
:data:`HOLD_S`; ``0``: never held).

Never a stale figure:

* While the connection is open no other process can write the store: DuckDB holds a shared
  lock on the file, and a writer waits for it (archsql's writers retry for
  ``ARCHSQL_LOCK_WAIT_S``: :func:`archsql.store._open`).  That is why the connection is let
  go after the idle time, rather than held for the life of the process.
* Every open of the store in this process through :mod:`archsql.store` (a write, a sweep,
  an export, a build) first lets the held connection of that file go (:func:`release`):
  DuckDB shares one database instance per file and process, so a held instance would
  otherwise refuse a writable connection, or lend a reader its locked-down settings.
* Each call compares the file's identity — device, inode, size and modification time of
  the store and of its write-ahead log (:func:`file_identity`) — with the identity taken
  before the connection was opened; any difference (the file replaced, or written by a
  client that bypassed the lock) opens the store again, from scratch.

A plain ``duckdb.connect(path)`` (read-write) of the same file in this process while a
connection is held is refused by DuckDB ("a different configuration than existing
connections"): call :func:`release` (``archsql.api.release``) first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# how long a held connection waits for the next query before it is closed (seconds)
HOLD_S = 1.0
HOLD_ENV = "ARCHSQL_QUERY_HOLD_S"


def hold_seconds() -> float:
    """``$ARCHSQL_QUERY_HOLD_S`` (seconds; ``0`` turns holding off), else :data:`HOLD_S`."""
    try:
        return max(float(os.environ.get(HOLD_ENV, HOLD_S)), 0.0)
    except ValueError:
        return HOLD_S


def file_identity(path: Path) -> tuple | None:
    """What changes whenever the store file changes: (device, inode, size, mtime in ns) of
    the file and of its write-ahead log ``<file>.wal`` (None while there is none); None when
    the file is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        w = os.stat(f"{path}.wal")
        wal = (w.st_ino, w.st_size, w.st_mtime_ns)
    except OSError:
        wal = None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, wal)


@dataclass(eq=False)
class _Held:
    identity: tuple
    con: Any  # duckdb.DuckDBPyConnection
    info: Any  # what the opener returned beside the connection
    hold_s: float
    used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: int | None = None  # the thread using it now
    doomed: bool = False  # released while its own thread used it: closed when that use ends
    closed: bool = False
    timer: threading.Timer | None = None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
            with contextlib.suppress(Exception):
                self.con.close()


_HELD: dict[Path, _Held] = {}
_REGISTRY = threading.Lock()  # guards _HELD


def _key(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def held(path: str | Path, opener: Callable[[Path], tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """Yield ``(connection, info)`` for a read-only use of the store ``path``: the held one
    while its file is unchanged, else a new one from ``opener(path)`` (which returns the
    connection and any ``info`` to keep with it).  The caller must leave the connection as
    it found it (no temporary objects or settings of its own).  An exception in the block
    closes the connection (it is opened again next time)."""
    key = _key(path)
    entry = _checkout(key, hold_seconds(), opener)
    ok = False
    try:
        yield entry.con, entry.info
        ok = True
    finally:
        entry.used = time.monotonic()
        entry.owner = None
        with _REGISTRY:
            kept = ok and not entry.doomed and _HELD.get(key) is entry
            if not kept and _HELD.get(key) is entry:
                del _HELD[key]
        if not kept:
            entry.close()
        entry.lock.release()


def _checkout(key: Path, hold_s: float, opener: Callable[[Path], tuple[Any, Any]]) -> _Held:
    """The entry of ``key``, locked for this thread: the held one while the file is unchanged,
    else a new one from ``opener`` (held when ``hold_s`` > 0)."""
    identity = file_identity(key)  # taken before opening: a change while opening shows next time
    with _REGISTRY:
        entry = _HELD.get(key)
    if entry is not None:
        entry.lock.acquire()
        if not entry.closed and identity is not None and entry.identity == identity and hold_s > 0:
            entry.owner = threading.get_ident()
            return entry
        with _REGISTRY:
            if _HELD.get(key) is entry:
                del _HELD[key]
        entry.close()
        entry.lock.release()
    con, info = opener(key)
    entry = _Held(identity or (), con, info, hold_s)
    entry.lock.acquire()
    entry.owner = threading.get_ident()
    if hold_s > 0 and identity is not None:
        with _REGISTRY:
            previous = _HELD.get(key)
            _HELD[key] = entry
        if previous is not None:  # opened meanwhile by another thread
            _close_when_free(previous)
        _schedule(key, entry, hold_s)
    else:
        entry.doomed = True  # closed when this use ends
    return entry


# The idle timers: daemon threads (a process exits without waiting for one), each of which may
# be closing a connection — DuckDB's C++ code — when the interpreter exits.  A daemon thread
# that takes the GIL back after finalization began is ended by pthread_exit, and unwinding it
# through DuckDB's frames aborts the process ("FATAL: exception not rethrown", exit 134, seen
# under load at the end of `archsql sql`).  So at exit no timer starts, and the running ones
# are cancelled and waited for before the interpreter finalizes (:func:`_at_exit`).
_TIMERS: set[threading.Timer] = set()
_EXITING = threading.Event()


def _schedule(key: Path, entry: _Held, delay: float) -> None:
    if _EXITING.is_set():
        return
    timer = threading.Timer(delay, _expire, args=(key, entry))
    timer.daemon = True
    entry.timer = timer
    _TIMERS.add(timer)
    timer.start()


def _expire(key: Path, entry: _Held) -> None:
    """The idle timer: close the entry when unused for its hold time, else look again later."""
    try:
        _expire_once(key, entry)
    finally:
        _TIMERS.discard(threading.current_thread())  # type: ignore[arg-type]


def _expire_once(key: Path, entry: _Held) -> None:
    if entry.closed:
        return
    if not entry.lock.acquire(blocking=False):  # in use: look again after a hold time
        _schedule(key, entry, entry.hold_s)
        return
    try:
        idle = time.monotonic() - entry.used
        if entry.closed:
            return
        if idle < entry.hold_s:
            _schedule(key, entry, max(entry.hold_s - idle, 0.01))
            return
        with _REGISTRY:
            if _HELD.get(key) is entry:
                del _HELD[key]
        entry.close()
    finally:
        entry.lock.release()


def _close_when_free(entry: _Held) -> None:
    """Close ``entry`` once no query runs on it (at the end of the use, when this very thread
    is using it)."""
    if entry.owner == threading.get_ident():
        entry.doomed = True
        return
    with entry.lock:
        entry.close()


def release(path: str | Path | None = None) -> None:
    """Close the held connection of the store ``path`` (every held one: None), waiting for a
    query running on it to finish.  Called by every open of a store file
    (:func:`archsql.store._open`)."""
    with _REGISTRY:
        if not _HELD:
            return
        if path is None:
            entries = list(_HELD.items())
            _HELD.clear()
        else:
            key = _key(path)
            entry = _HELD.pop(key, None)
            entries = [(key, entry)] if entry is not None else []
    for _, entry in entries:
        _close_when_free(entry)


def held_paths() -> list[Path]:
    """The stores a connection is held open for now."""
    with _REGISTRY:
        return sorted(_HELD)


_INHERITED: list = []  # a forked child's copies of its parent's connections, never closed


def _forget_after_fork() -> None:
    """A forked child must not use its parent's connections, nor close them (DuckDB's worker
    threads are not in the child): they are kept unreferenced by the registry for good."""
    global _REGISTRY
    _INHERITED.extend(entry.con for entry in _HELD.values())
    _HELD.clear()
    _TIMERS.clear()  # (the parent's threads: none of them is in the child)
    _REGISTRY = threading.Lock()


def _at_exit() -> None:
    """Close every held connection, and let no idle timer run DuckDB code past this point."""
    _EXITING.set()
    release()
    while pending := [t for t in list(_TIMERS) if t is not threading.current_thread()]:
        for timer in pending:
            timer.cancel()
            timer.join()
            _TIMERS.discard(timer)


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
