"""Sweeps: a grid of layouts × workloads through the SOL views, leaving the store unchanged."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from archsql.errors import QueryError
from archsql.sweep import grid, pareto, sweep


def test_grid_keeps_only_layouts_that_divide_the_gpus():
    deployments, workloads = grid(["H200 SXM"], [8], [1, 3, 8], [1, 8], [1, 64], [8192])
    # tp 3 does not divide 8 GPUs; each remaining (tp, ep) pair is one deployment
    assert sorted((d[3], d[4], d[5], d[6]) for d in deployments) == [
        (1, 8, 1, 8),
        (1, 8, 8, 1),
        (8, 1, 1, 8),
        (8, 1, 8, 1),
    ]
    assert all(d[3] * d[4] == d[2] and d[5] * d[6] == d[2] for d in deployments)
    assert [(w[2], w[3], w[4]) for w in workloads] == [(1, 1, 8192), (64, 1, 8192)]


def test_sweep_answers_every_point_and_leaves_the_store_unchanged(catalog_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    deployments, workloads = grid(
        ["H200 SXM", "B200 (HGX/DGX B200)"], [8], [1, 8], [8], [1, 64], [8192, 32768], ["fp8"]
    )
    table = sweep("DeepSeek-V3", db, deployments, workloads)
    assert table.num_rows == len(deployments) * len(workloads) == 16
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("select count(*) from deployments where deployment like 'sweep:%'").fetchone() == (0,)
    rows = table.to_pylist()
    for r in rows:  # tokens/s per GPU is the step's tokens over its time and GPUs
        assert r["tokens_per_s_per_gpu"] == pytest.approx(r["batch"] / r["time_s"] / r["gpus"])
    front = pareto(table).to_pylist()
    fitting = [r for r in rows if r["fits"]]
    assert front and all(r["fits"] for r in front)
    for p in front:  # no fitting point beats a frontier point on both axes (brute force)
        assert not any(
            q["tokens_per_s_per_user"] >= p["tokens_per_s_per_user"]
            and q["tokens_per_s_per_gpu"] >= p["tokens_per_s_per_gpu"]
            and (
                q["tokens_per_s_per_user"] > p["tokens_per_s_per_user"]
                or q["tokens_per_s_per_gpu"] > p["tokens_per_s_per_gpu"]
            )
            for q in fitting
        )


def test_sweep_of_a_model_not_in_the_store_says_how_to_fix_it(catalog_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    deployments, workloads = grid(["H200 SXM"], [8], [8], [8], [1], [8192])
    with pytest.raises(QueryError, match="archsql build NoSuchModel"):
        sweep("NoSuchModel", db, deployments, workloads)
    with pytest.raises(QueryError, match="grid is empty"):
        sweep("DeepSeek-V3", db, [], workloads)


def test_deployment_checks_report_broken_layouts(catalog_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(catalog_db, db)
    con = duckdb.connect(str(db))
    assert con.execute("select count(*) from deployment_checks").fetchone() == (0,)  # the defaults are valid
    con.execute("insert into deployments values ('bad', 'H300', 8, 4, 1, 8, 1, 1, 'bf16', 'bf16', 'fp9', 0.9)")
    rules = {r for (r,) in con.execute("select rule from deployment_checks where deployment = 'bad'").fetchall()}
    assert rules == {"attention degrees", "gpu", "dtype"}
