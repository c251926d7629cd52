"""Every view invariant holds on the real catalog store, not only on the toy stores.

The view sidecars (``*.yml``) state invariants as SQL that must return no rows. The toy
stores in ``test_views.py`` exercise each one (and mutate data to prove each can fail);
this test runs them all against the store ``archsql build`` writes for the whole catalog,
where MTP stacks, hybrid schedules, streams, vision towers and every deployment layout
meet — the cases a hand-made toy store does not hold.
"""

from __future__ import annotations

import duckdb

from archsql.views import check_invariants


def test_every_invariant_holds_on_the_catalog_store(catalog_db):
    con = duckdb.connect(str(catalog_db), read_only=True)
    try:
        failures = check_invariants(con)
    finally:
        con.close()
    assert failures == [], "view invariants violated on the catalog store: " + ", ".join(
        f"{view}.{name} ({rows} rows)" for view, name, rows in failures
    )
