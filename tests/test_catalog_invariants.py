"""Every view invariant holds on the real catalog store, not only on the toy stores.

The view sidecars (``*.yml``) state invariants as SQL that must return no rows. The toy
stores in ``test_views.py`` exercise each one (and mutate data to prove each can fail);
this test runs them all against the store ``archsql build`` writes for the whole catalog,
where MTP stacks, hybrid schedules, streams, vision towers and every deployment layout
meet — the cases a hand-made toy store does not hold.
"""

from __future__ import annotations

import json
from pathlib import Path

from archsql.api import catalog
from archsql.store import connect
from archsql.views import check_invariants

CONFIGS = Path(__file__).parents[1] / "archsql" / "specs" / "configs"


def test_every_invariant_holds_on_the_catalog_store(catalog_db):
    con = connect(catalog_db)
    try:
        failures = check_invariants(con)
    finally:
        con.close()
    assert failures == [], "view invariants violated on the catalog store: " + ", ".join(
        f"{view}.{name} ({rows} rows)" for view, name, rows in failures
    )


def test_layers_are_the_configs_decoder_layers(catalog_db):
    """model_summary.layers counts decoder layers only — the config's num_hidden_layers
    (text_config's for multimodal checkpoints): vision-tower layers and MTP (next-n) layers
    are stacks of their own roles and not counted."""
    con = connect(catalog_db)
    try:
        rows = con.execute(
            "select s.model, s.layers, m.config_file from model_summary as s join models as m using (model)"
        ).fetchall()
    finally:
        con.close()
    assert len(rows) == len(catalog())
    for model, layers, config_file in rows:
        cfg = json.loads((CONFIGS / config_file).read_text())
        cfg = cfg.get("text_config") or cfg
        assert layers == cfg["num_hidden_layers"], model
