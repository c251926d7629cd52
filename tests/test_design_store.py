"""The design store's derived tables after a sequence of design commands (compare, edit,
edit again with another edit, edit with another KV dtype, audit): each command replaces the
store's workloads and deployments with its own question's, so each write changes other rows
than the last; after every step each derived table holds the rows its view gives live (the
ground truth of tests/test_derived.py), so no design command and no later read of the design
store is served a stale figure.  And a design store holds the deployments its question reads,
not the main store's every deployment, and the derived rows of the views its SQL reads, not
every report's: each deployment and each view costs its rows for every model."""

from __future__ import annotations

import duckdb
import pytest

from archsql.design.audit import audit
from archsql.design.compare import CONTRACT_DEPLOYMENT, compare_components
from archsql.design.edit import DEFAULT_DEPLOYMENT, edit_model
from tests.test_derived import _assert_derived_rows_are_the_live_rows

BASE = "Meta-Llama-3.1-8B"


def _deployments(db) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return [r[0] for r in con.execute("select deployment from deployments order by deployment").fetchall()]


@pytest.fixture
def counted_refreshes(monkeypatch):
    """How many times the whole derived schema was computed again (archsql.store.refresh)."""
    import archsql.store

    calls: list[int] = []
    whole = archsql.store.refresh

    def counted(con, *views):
        calls.append(1)
        return whole(con, *views)

    monkeypatch.setattr(archsql.store, "refresh", counted)
    return calls


def test_a_sequence_of_design_commands_leaves_every_derived_table_current(tmp_path, counted_refreshes):
    db = tmp_path / "design.duckdb"
    compare_components(
        "attention",
        [f"gqa_attention@{BASE}", "mla_attention@DeepSeek-V3"],
        d_model=4096,
        contexts=(2048,),
        db=db,
        specs_dir=tmp_path / "probes",
    )
    assert _deployments(db) == [CONTRACT_DEPLOYMENT]  # the contract's, none of the main store's

    four = edit_model(BASE, set_dims={"n_kv_heads": 4}, context="8k", out_dir=tmp_path, db=db)
    assert _deployments(db) == [DEFAULT_DEPLOYMENT]  # the ledger's deployment, none of the others
    assert four.ledger.num_rows
    _assert_derived_rows_are_the_live_rows(db)

    # the same question (context, deployment), another edit: the parameter rows are the stored
    # ones, so only the written models' derived rows are computed, never the whole schema
    whole = len(counted_refreshes)
    two = edit_model(BASE, set_dims={"n_kv_heads": 2}, context="8k", out_dir=tmp_path, db=db)
    assert len(counted_refreshes) == whole
    assert two.derived.name != four.derived.name
    _assert_derived_rows_are_the_live_rows(db)

    fp8 = edit_model(BASE, set_dims={"n_kv_heads": 2}, context="8k", dtype="fp8", out_dir=tmp_path, db=db)
    assert _deployments(db) == [fp8.deployment] == [f"{DEFAULT_DEPLOYMENT}+kv-fp8"]
    card = audit(four.derived.path, BASE, changed_field="num_key_value_heads", db=db)
    assert card.fields and _deployments(db) == []  # an audit card reads no deployment
    materialized = _assert_derived_rows_are_the_live_rows(db)
    # the derived rows kept are those of the views the design's SQL reads (and what they read)
    assert {"step_sol", "device_memory", "architecture_profile"} <= set(materialized)
    assert not {"kernel_sol", "fusion_matches", "serving_estimates"} & set(materialized)
