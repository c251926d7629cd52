"""Saved queries run read-only against the catalog store."""

from __future__ import annotations

import pytest

from archsql import queries
from archsql.api import catalog
from archsql.errors import QueryError


@pytest.mark.parametrize("name", sorted(queries.saved()))
def test_saved_query_runs(catalog_db, name):
    """Every saved query answers on the catalog store, or — when it reads a part that store
    lacks (a kernel corpus, a saved sweep: tests/test_site.py runs those on stores that have
    them) — is refused naming that part and how to add it."""
    missing = queries.missing_parts(queries.text(name), catalog_db)
    if missing:
        with pytest.raises(QueryError, match="which only a store with") as info:
            queries.run(name, db=catalog_db)
        assert [i.message for i in info.value.issues] == [part.how for part in missing]
        return
    table = queries.run(name, db=catalog_db)
    assert table.num_rows > 0
    assert queries.saved()[name]  # every saved query describes itself


def test_summary_has_one_row_per_model(catalog_db):
    rows = queries.run("summary", db=catalog_db).to_pylist()
    assert sorted(r["model"] for r in rows) == sorted(catalog())
    llama = next(r for r in rows if r["model"] == "Meta-Llama-3.1-8B")
    assert llama["kv_bytes_per_token_bf16"] == 131_072 and llama["params"] == 8_030_261_248


def test_attention_share_grows_with_context(catalog_db):
    rows = [
        r
        for r in queries.run("attention_share", db=catalog_db).to_pylist()
        if r["model"] == "Meta-Llama-3.1-8B" and r["workload"].startswith("decode_b1_")
    ]
    by_context = sorted((r["context"], r["attention_share"]) for r in rows)
    shares = [s for _, s in by_context]
    assert len(shares) >= 3 and shares == sorted(shares) and 0 < shares[0] < shares[-1] < 1


def test_unknown_saved_query_suggests_the_name():
    with pytest.raises(QueryError, match="did you mean 'summary'"):
        queries.text("sumary")


def test_kv_by_context_shows_windows(catalog_db):
    rows = {(r["model"], r["workload"]): r for r in queries.run("kv_by_context", db=catalog_db).to_pylist()}
    llama = rows[("Meta-Llama-3.1-8B", "decode_b1_c128k")]
    assert llama["bytes_per_request"] == 131_072 * 131_072 and llama["share_of_unbounded"] == 1
    # Mistral-7B v0.1 keeps a 4096-token window: at 128K it holds 4096 / 131072 of a full cache
    mistral = rows[("Mistral-7B-Instruct-v0.1", "decode_b1_c128k")]
    assert mistral["bytes_per_request"] == 131_072 * 4096 and mistral["share_of_unbounded"] == 4096 / 131_072
