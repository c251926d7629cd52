"""Shared fixtures: the whole catalog built once per session into a temp DuckDB file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def catalog_db(tmp_path_factory) -> Path:
    from archsql.api import build

    db = tmp_path_factory.mktemp("store") / "catalog.duckdb"
    build(db=db)
    return db


def load_inventory(config_file: str) -> dict:
    """A meta-device tensor inventory (see tests/fixtures/meta_inventories/SOURCES.md)."""
    stem = config_file.removesuffix(".json")
    with gzip.open(FIXTURES / "meta_inventories" / f"{stem}.json.gz") as f:
        return json.load(f)
