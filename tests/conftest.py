"""Shared fixtures: the whole catalog built once per session into a temp DuckDB file."""

from __future__ import annotations

import collections
import contextlib
import functools
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from filelock import FileLock

# CLI output is read as text by the tests: a wide terminal, so that a message is one line
# (tests/test_cli_output.py sets 80 and 160 columns itself to test the narrow layouts)
os.environ.setdefault("COLUMNS", "200")
# DuckDB's worker threads: one per connection (archsql.store.tune_optimizer), inherited by the
# CLI subprocesses too.  The suite runs in one xdist worker per core, so a connection's own
# threads would only contend with the other worker's: the same rows for ~10 % less CPU
# (tests/test_views.py + test_flops_kv.py: 146 → 132 s user+sys, of which sys 22.5 → 13.8 s)
os.environ.setdefault("ARCHSQL_THREADS", "1")

FIXTURES = Path(__file__).parent / "fixtures"


def _tuned_connect(*args, __connect=duckdb.connect, **kwargs):
    """duckdb.connect planning as archsql's own connections do (archsql.store.tune_optimizer):
    the tests read live views through plain connections to check the views themselves, and
    the optimizer pass left out changes how long a plan takes, never its rows."""
    from archsql.store import tune_optimizer

    con = __connect(*args, **kwargs)
    tune_optimizer(con)  # (and $ARCHSQL_THREADS)
    return con


duckdb.connect = _tuned_connect


def _run_folder(tmp_path_factory) -> Path:
    """This test run's folder, shared by the xdist workers (above each worker's own)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


@pytest.fixture(scope="session", autouse=True)
def _cache_folder(tmp_path_factory):
    """archsql's cache (the empty store a new store is copied from) in this run's folder: a
    run never reads a cache another run (or the user) wrote."""
    os.environ["ARCHSQL_CACHE_DIR"] = str(_run_folder(tmp_path_factory) / "archsql-cache")


@contextlib.contextmanager
def _env(**values: str):
    """Environment variables set for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def shared_store(root: Path, models: tuple[str, ...], threads: int | None = None) -> Path:
    """The store of ``models`` (the catalog when none) under ``root``, built by the first caller
    under a file lock (the others wait and read the same file).  ``threads``: DuckDB's threads
    for the build (default: one per core, since the other worker is often waiting on it)."""
    from archsql.api import build

    root.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256("\n".join(models).encode()).hexdigest()[:16] if models else "catalog"
    db = root / key / "store.duckdb"
    built = db.with_name("built")  # written last: a store left half-built by a crash is rebuilt
    with FileLock(root / f"{key}.lock"):
        if not built.exists():
            shutil.rmtree(db.parent, ignore_errors=True)
            db.parent.mkdir(parents=True)
            with _env(ARCHSQL_THREADS=str(threads or os.cpu_count() or 1)):
                build(list(models) or None, db=db)
            built.write_text("\n".join(models) or "catalog")
    return db


def _shared_stores(tmp_path_factory) -> Path:
    return _run_folder(tmp_path_factory) / "shared-stores"


def _uses_catalog(item: pytest.Item) -> bool:
    return "catalog_db" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config, items):
    """The files that read the whole catalog run last, so the catalog store is built in the
    background meanwhile (:func:`_catalog_in_background`) instead of both workers waiting
    ~1 min on it at the start; within each part, files with more tests first (xdist's own
    heuristic, which pyproject's ``--no-loadscope-reorder`` turns off so that this order
    holds).  A stable sort: each file's tests keep their order, and every worker sorts alike."""
    late = {item.path for item in items if _uses_catalog(item)}
    tests = collections.Counter(item.path for item in items)
    items.sort(key=lambda item: (item.path in late, -tests[item.path]))


@pytest.fixture(scope="session", autouse=True)
def _catalog_in_background(request, tmp_path_factory, _cache_folder):
    """When this run has tests that read the catalog store, one process (the first xdist
    worker, or the only one) starts building it in a subprocess (one DuckDB thread under
    xdist) under :func:`shared_store`'s lock: a test that needs it first waits on the lock,
    and a build that failed is done again by that test (which then shows the error)."""
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0" or not any(map(_uses_catalog, request.session.items)):
        yield
        return
    root = _shared_stores(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    log = root / "catalog-build.log"
    # one DuckDB thread beside two busy xdist workers; every core when this run has no other
    threads = 1 if os.environ.get("PYTEST_XDIST_WORKER") else None
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import conftest; " \
        f"conftest.shared_store(conftest.Path({str(root)!r}), (), threads={threads})"  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        try:
            proc.wait(timeout=600)  # a worker may still be waiting on it
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def store_of(tmp_path_factory):
    """``store_of(*models)``: the path of a store of those models (the whole catalog when none
    are named) with the default parameter tables, built once per test run per set of models and
    shared by the xdist workers (:func:`shared_store`).  Read it, or copy it before writing."""
    root = _shared_stores(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    return lambda *models: shared_store(root, models)


@pytest.fixture(scope="session")
def catalog_db(store_of) -> Path:
    return store_of()


# The models the deployment tests ask about (per-device memory, SOL, meshes, sweeps): a store
# of just these answers their one-model questions without running the per-device views over
# the whole catalog.  Each test file names the models it needs; keep them in this list.
DEPLOYMENT_MODELS = (
    "Meta-Llama-3.1-8B",
    "Qwen3-8B",
    "Qwen2.5-7B",
    "Qwen3-30B-A3B",
    "gpt-oss-20b",
    "DeepSeek-V3",
    "GLM-5.2",
)


@pytest.fixture(scope="session")
def models_db(store_of) -> Path:
    """A store of DEPLOYMENT_MODELS with the default parameter tables."""
    return store_of(*DEPLOYMENT_MODELS)


def load_inventory(config_file: str) -> dict:
    """A meta-device tensor inventory (see tests/fixtures/meta_inventories/SOURCES.md); read
    once per session, each caller gets its own top-level dict."""
    return dict(_read_inventory(config_file))


@functools.cache
def _read_inventory(config_file: str) -> dict:
    stem = config_file.removesuffix(".json")
    with gzip.open(FIXTURES / "meta_inventories" / f"{stem}.json.gz") as f:
        return json.load(f)
