"""Sweeps: a grid of layouts × workloads through the SOL views, leaving the store unchanged."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from archsql.errors import QueryError
from archsql.sweep import grid, pareto, sweep


@pytest.fixture(scope="module")
def sweep_db(store_of):
    """A store of the three models the sweeps ask about (each test sweeps a copy of it)."""
    return store_of("DeepSeek-V3", "Meta-Llama-3.1-8B", "Qwen2.5-7B")


def test_grid_keeps_only_layouts_that_divide_the_gpus():
    deployments, workloads = grid(["H200 SXM"], [8], [1, 64], [8192], degrees={"tp": [1, 3, 8], "ep": [1, 8]})
    # tp 3 does not divide 8 GPUs; each remaining (tp, ep) pair is one deployment
    assert sorted((d["tp"], d["dp"], d["ep"], d["moe_tp"]) for d in deployments) == [
        (1, 8, 1, 8),
        (1, 8, 8, 1),
        (8, 1, 1, 8),
        (8, 1, 8, 1),
    ]
    assert all(d["tp"] * d["dp"] == d["gpus"] and d["ep"] * d["moe_tp"] == d["gpus"] for d in deployments)
    assert [(w["batch"], w["new_tokens"], w["context"]) for w in workloads] == [(1, 1, 8192), (64, 1, 8192)]


def test_grid_refuses_an_axis_it_does_not_sweep():
    with pytest.raises(QueryError, match="'dp' is not a swept mesh axis"):
        grid(["H200 SXM"], [8], [1], [8192], degrees={"dp": [8]})


def test_sweep_answers_every_point_and_leaves_the_store_unchanged(sweep_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    deployments, workloads = grid(
        ["H200 SXM", "B200 (HGX/DGX B200)"], [8], [1, 64], [8192, 32768], ["fp8"], degrees={"tp": [1, 8], "ep": [8]}
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


def test_sweep_of_a_model_not_in_the_store_says_how_to_fix_it(sweep_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    deployments, workloads = grid(["H200 SXM"], [8], [1], [8192], degrees={"tp": [8], "ep": [8]})
    with pytest.raises(QueryError, match="archsql build NoSuchModel"):
        sweep("NoSuchModel", db, deployments, workloads)
    with pytest.raises(QueryError, match="grid is empty"):
        sweep("DeepSeek-V3", db, [], workloads)


def test_a_grid_beyond_the_bound_is_refused_before_it_is_evaluated(tmp_path):
    """4 tp degrees × 250 batches × 101 contexts = 4 × 25,250 = 101,000 points > MAX_POINTS
    (100,000): refused with the count and how to narrow it, before any store is opened (the path
    does not exist).  A 3,920-point sweep once took 20 GB of memory."""
    deployments, workloads = grid(
        ["H200 SXM"], [8], list(range(1, 251)), [1024 * c for c in range(1, 102)], degrees={"tp": [1, 2, 4, 8]}
    )
    assert (len(deployments), len(workloads)) == (4, 25_250)
    with pytest.raises(QueryError, match=r"101,000 points .* at most 100,000") as err:
        sweep("Meta-Llama-3.1-8B", tmp_path / "absent.duckdb", deployments, workloads)
    assert "narrow --batch" in err.value.issues[0].message


def test_deployment_checks_report_broken_layouts(sweep_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    con = duckdb.connect(str(db))
    assert con.execute("select count(*) from deployment_checks").fetchone() == (0,)  # the defaults are valid
    con.execute(
        "insert into deployments by name select 'bad' as deployment, 'H300' as gpu, 8 as gpus, 'none' as cp_kind, "
        "'bf16' as weight_dtype, 'bf16' as act_dtype, 'fp9' as kv_dtype, 0.9 as usable_memory_fraction, "
        "'bf16' as weight_profile"
    )
    # tp 4 × dp 1 (no row: its default) = 4 of 8 GPUs; 'tpp' is no mesh axis
    con.execute("insert into deployment_mesh values ('bad', 'tp', 4), ('bad', 'ep', 8), ('bad', 'tpp', 2)")
    rules = {r for (r,) in con.execute("select rule from deployment_checks where deployment = 'bad'").fetchall()}
    assert rules == {"attention degrees", "gpu", "dtype", "mesh axis"}
    (fix,) = con.execute("select fix from deployment_checks where rule = 'mesh axis'").fetchone()
    assert fix == "use an axis of parallel_groups: tp, dp, ep, moe_tp, pp, cp"
    con.execute("insert into deployment_mesh values ('gone', 'tp', 2)")
    assert con.execute("select rule from deployment_checks where deployment = 'gone'").fetchall() == [
        ("mesh deployment",)
    ]


def test_grid_with_context_and_pipeline_parallel_degrees():
    """16 GPUs, tp 4 or 8, cp 1 or 2 (ring and Ulysses), pp 1 or 2, ep 8 or 16: attention runs
    tp × cp × dp × pp = 16 and experts ep × moe_tp × pp = 16; ep 16 with pp 2 does not divide."""
    rows, _ = grid(
        ["H200 SXM"],
        [16],
        [1],
        [8192],
        degrees={"tp": [4, 8], "ep": [8, 16], "cp": [1, 2], "pp": [1, 2]},
        cp_kinds=["ring", "ulysses"],
    )
    got = sorted((r["tp"], r["cp"], r["cp_kind"], r["pp"], r["dp"], r["ep"], r["moe_tp"]) for r in rows)
    expected = sorted(
        (tp, cp, kind, pp, 16 // (tp * cp * pp), ep, 16 // (ep * pp))
        for tp in (4, 8)
        for cp in (1, 2)
        for kind in (("ring", "ulysses") if cp > 1 else ("none",))
        for pp in (1, 2)
        for ep in (8, 16)
        if ep * pp <= 16 and tp * cp * pp <= 16  # powers of two: fitting is dividing
    )
    assert got == expected
    assert len({r["deployment"] for r in rows}) == len(rows)  # every point has its own name


def test_sweep_cli_over_context_and_pipeline_parallel_layouts(sweep_db, tmp_path):
    """`archsql sweep --cp --cp-kind --pp` on 16 H200 (2 nodes of 8): one row per layout and
    workload, with the node count and the context-parallel kind; a kind that does not exist is
    refused before anything runs."""
    import json

    from click.testing import CliRunner

    from archsql.cli import cli

    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    args = ["--db", str(db), "sweep", "Meta-Llama-3.1-8B", "--count", "16", "--tp", "8", "--ep", "1"]
    args += ["--batch", "1,64", "--context", "8k", "--cp", "1,2", "--cp-kind", "ring,ulysses", "--pp", "1,2"]
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    layouts = {(r["cp"], r["cp_kind"], r["pp"]) for r in rows}
    assert layouts == {(1, "none", 1), (1, "none", 2), (2, "ring", 1), (2, "ulysses", 1)}  # tp8·cp2·pp2 > 16
    assert len(rows) == 4 * 2 and {r["nodes"] for r in rows} == {2}
    bad = CliRunner().invoke(cli, [*args[:-4], "--cp", "2", "--cp-kind", "rings"])
    assert bad.exit_code != 0 and "'rings' is not a context-parallel kind" in bad.output


def test_sweep_names_layouts_the_model_cannot_run(sweep_db, tmp_path):
    """Qwen2.5-7B has 28 query heads: Ulysses over tp 4 × cp 2 = 8 cannot split them, the
    ring can.  The point says why (layout_problems) and is never on the Pareto front."""
    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    deployments, workloads = grid(
        ["H200 SXM"],
        [8],
        [1],
        [8192],
        phase="prefill",
        degrees={"tp": [4], "ep": [1], "cp": [2]},
        cp_kinds=["ring", "ulysses"],
    )
    table = sweep("Qwen2.5-7B", db, deployments, workloads)
    problems = {r["cp_kind"]: r["layout_problems"] for r in table.to_pylist()}
    assert problems["ring"] is None and "28 query heads do not split over tp × cp = 8" in problems["ulysses"]
    assert all(r["cp_kind"] == "ring" for r in pareto(table).to_pylist())
