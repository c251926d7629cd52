"""Sweeps: a grid of layouts × workloads through the SOL views, leaving the store unchanged."""

from __future__ import annotations

import shutil

import duckdb
import pyarrow as pa
import pytest

from archsql.errors import QueryError
from archsql.store import connect
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
    rows = json.loads(result.stdout)
    assert "tp8,pp2,cp2 on 16 GPUs: tp·pp·cp = 32 needs 32 GPUs, given 16" in result.stderr
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


# ---------------------------------------------------------------------------- layouts as a list, both phases


def test_parse_layout_and_its_errors(tmp_path):
    from archsql.sweep import parse_layout, read_layouts

    assert parse_layout("tp8,ep8") == {"tp": 8, "ep": 8}
    assert parse_layout(" TP4, dp2 ,moe_tp8") == {"tp": 4, "dp": 2, "moe_tp": 8}
    with pytest.raises(QueryError, match=r"--layout 'tpp8': 'tpp' is not a mesh axis \(did you mean 'tp'\?"):
        parse_layout("tpp8", where="--layout 'tpp8'")
    with pytest.raises(QueryError, match="'tp' is not an axis and a degree; write a layout as axes with degrees"):
        parse_layout("tp")
    with pytest.raises(QueryError, match=r"tp is given twice \(tp8 and tp4\)"):
        parse_layout("tp8,tp4")
    with pytest.raises(QueryError, match="the degree of ep must be at least 1, got 0"):
        parse_layout("ep0")
    file = tmp_path / "layouts.txt"
    file.write_text("# layouts of the 8-GPU node\ntp8,ep8\n\ndp8,ep8  # attention data parallel\ntp8,xp2\n")
    with pytest.raises(QueryError, match=r"layouts.txt:5: 'xp' is not a mesh axis"):
        read_layouts(file)
    file.write_text("# layouts of the 8-GPU node\ntp8,ep8\n\ndp8,ep8  # attention data parallel\n")
    assert read_layouts(file) == [{"tp": 8, "ep": 8}, {"dp": 8, "ep": 8}]
    file.write_text("# nothing\n")
    with pytest.raises(QueryError, match="no layout in the file"):
        read_layouts(file)


def test_plan_drops_grid_points_and_says_why():
    from archsql.sweep import plan

    layouts = [
        {"tp": 8, "ep": 8},
        {"dp": 8, "ep": 8},
        {"tp": 3},
        {"tp": 8, "dp": 2},
        {"tp": 2, "dp": 2},
        {"tp": 8, "ep": 8, "dp": 1},
    ]
    g = plan(["H200 SXM"], [8], [1], [8192], phase="both", layouts=layouts)
    # tp8,ep8: dp = 8 / 8 = 1, moe_tp = 8 / 8 = 1; dp8,ep8: tp 1, moe_tp 1
    assert [(d["tp"], d["dp"], d["ep"], d["moe_tp"]) for d in g.deployments] == [(8, 1, 8, 1), (1, 8, 8, 1)]
    assert list(g.labels.values()) == ["tp8,ep8", "dp8,ep8"]
    assert [str(d) for d in g.dropped] == [
        "tp3 on 8 GPUs: tp·pp·cp = 3 does not divide 8 GPUs",  # dp would be 8 / 3
        "tp8,dp2 on 8 GPUs: tp·dp·pp·cp = 16 needs 16 GPUs, given 8",  # 8·2·1·1 = 16 > 8
        "tp2,dp2 on 8 GPUs: tp·dp·pp·cp = 4 leaves 4 of 8 GPUs idle (raise dp or lower the count)",  # 2·2 = 4
        "tp8,ep8,dp1 on 8 GPUs: the same layout as tp8,ep8",
    ]
    # a prefill (s = c) and a decode (s = 1) workload per batch × context
    assert [(w["phase"], w["new_tokens"], w["context"]) for w in g.workloads] == [
        ("prefill", 8192, 8192),
        ("decode", 1, 8192),
    ]
    with pytest.raises(QueryError, match="not both"):
        plan(["H200 SXM"], [8], [1], [8192], layouts=layouts, degrees={"tp": [8]})
    with pytest.raises(QueryError, match=r"usable memory fraction must be in \(0, 1\], got 1.5"):
        plan(["H200 SXM"], [8], [1], [8192], usable_memory_fraction=1.5)


def _cli(db, *args):
    from click.testing import CliRunner

    from archsql.cli import cli

    return CliRunner().invoke(cli, ["--db", str(db), "sweep", *args])


def test_sweep_cli_layouts_both_phases_match_the_stores_own_rows(sweep_db, tmp_path):
    """`--layout tp8,ep8 --layout dp8,ep8 --weights native` on 8 H200 is the default
    deployments 8xH200-tp8-ep8-wnative and 8xH200-dp8-ep8-wnative (vLLM's 0.9 of memory):
    each point's TTFT is step_sol's prefill_8k time (B = 1, s = c = 8192), its TPOT the
    decode_b1_c8k / decode_b64_c8k step, its max_batch device_memory's — read from the store's
    own rows, an answer the sweep's temporary grid does not produce."""
    import json

    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    args = ["DeepSeek-V3", "--layout", "tp8,ep8", "--layout", "dp8,ep8", "--layout", "tp3,ep8", "--weights", "native"]
    result = _cli(db, *args, "--batch", "1,64", "--context", "8k", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "dropped 1 grid point:\n  tp3,ep8 on 8 GPUs: tp·pp·cp = 3 does not divide 8 GPUs" in result.stderr
    rows = {(r["layout"], r["batch"]): r for r in json.loads(result.stdout)}
    assert sorted(rows) == [("dp8,ep8", 1), ("dp8,ep8", 64), ("tp8,ep8", 1), ("tp8,ep8", 64)]
    con = connect(db)  # the store's own rows: its derived tables (the sweep left it unchanged)
    step = dict(
        con.execute("select deployment || '/' || workload, time_s from step_sol where model = 'DeepSeek-V3'").fetchall()
    )
    memory = dict(
        con.execute(
            "select deployment || '/' || workload, max_batch from device_memory where model = 'DeepSeek-V3'"
        ).fetchall()
    )
    con.close()
    for layout in ("tp8,ep8", "dp8,ep8"):
        deployment = f"8xH200-{layout.replace(',', '-')}-wnative"
        one, many = rows[(layout, 1)], rows[(layout, 64)]
        assert one["ttft_s"] == pytest.approx(step[f"{deployment}/prefill_8k"], rel=1e-12)
        assert one["tpot_s"] == pytest.approx(step[f"{deployment}/decode_b1_c8k"], rel=1e-12)
        assert many["tpot_s"] == pytest.approx(step[f"{deployment}/decode_b64_c8k"], rel=1e-12)
        assert one["max_batch"] == memory[f"{deployment}/decode_b1_c8k"]
        # a decode step makes one token per request: tokens/s/user = 1 / TPOT; per GPU: B / TPOT / 8
        assert many["tokens_per_s_per_user"] == pytest.approx(1 / many["tpot_s"])
        assert many["tokens_per_s_per_gpu"] == pytest.approx(64 / many["tpot_s"] / 8)
        for r in (one, many):  # fits when both steps fit
            assert r["fits"] == (r["prefill_fits"] and r["decode_fits"])
    # the table a person reads: the columns that matter, times in human units
    table = _cli(db, *args, "--batch", "1", "--context", "8k")
    assert table.exit_code == 0, table.output
    header = next(line for line in table.stdout.splitlines() if "layout" in line)
    assert [c for c in header.replace("┃", " ").split()] == [
        "layout",
        "batch",
        "context",
        "fits",
        "ttft_s",
        "tpot_s",
        "tokens_per_s_per_gpu",
        "tokens_per_s_per_user",
        "max_batch",
    ]
    assert " ms " in table.stdout


def test_sweep_cli_memory_fraction_is_a_deployments_usable_fraction(sweep_db, tmp_path):
    """--memory-fraction 0.5 gives the max_batch device_memory gives a deployment added with
    usable_memory_fraction 0.5 (the same layout)."""
    import json

    from archsql import api

    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    api.add_deployment("8xH200-tp8-half", db=db, gpu="H200 SXM", tp=8, moe_tp=8, usable_memory_fraction=0.5)
    (expected,) = (
        duckdb.connect(str(db), read_only=True)
        .execute(
            "select max_batch from device_memory where model = 'Meta-Llama-3.1-8B' "
            "and deployment = '8xH200-tp8-half' and workload = 'decode_b1_c8k'"
        )
        .fetchone()
    )
    args = ["Meta-Llama-3.1-8B", "--layout", "tp8", "--batch", "1", "--context", "8k", "--phase", "decode"]
    half = json.loads(_cli(db, *args, "--memory-fraction", "0.5", "--format", "json").stdout)
    full = json.loads(_cli(db, *args, "--format", "json").stdout)
    assert half[0]["max_batch"] == expected < full[0]["max_batch"]
    assert "ttft_s" not in half[0]  # a decode-only sweep has no prefill columns


def test_sweep_cli_refuses_what_it_cannot_answer(sweep_db, tmp_path):
    db = tmp_path / "store.duckdb"
    shutil.copy(sweep_db, db)
    base = ["Meta-Llama-3.1-8B", "--batch", "1", "--context", "8k"]
    cases = {
        ("--layout", "tq8"): "'tq' is not a mesh axis",
        ("--layout", "tp8", "--tp", "8"): "--tp sweeps the degrees of one axis; with --layout/--layouts",
        ("--layout", "tp16"): "every grid point was dropped: tp16 on 8 GPUs: tp·pp·cp = 16 needs 16 GPUs, given 8",
        ("--layout", "tp8", "--columns", "layot"): "no column 'layot' (did you mean 'layout'?)",
        ("--memory-fraction", "1.5"): "1.5 is not in the range 0<x<=1",
        ("--layouts", str(tmp_path / "none.txt")): "does not exist",
    }
    for extra, message in cases.items():
        result = _cli(db, *base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
        assert "Traceback" not in result.output
    layouts = tmp_path / "layouts.txt"
    layouts.write_text("tp8\ntp4,dp2\n")
    result = _cli(db, *base, "--layouts", str(layouts), "--columns", "layout,tpot_s", "--format", "csv")
    assert result.exit_code == 0, result.output
    import csv

    assert [row[0] for row in csv.reader(result.stdout.splitlines())] == ["layout", "tp8", "tp4,dp2"]


def test_pareto_keeps_the_points_no_other_fitting_point_dominates():
    """Hand-made points (tokens/s per user, per GPU): (1, 1) is beaten by (2, 2); (2, 1) and
    (1, 2) by (2, 2) too (as good on one axis, better on the other); (2, 2) and (0, 3) beat
    each other on one axis each: the frontier.  (5, 5) does not fit and (4, 4) is a layout the
    model cannot run: neither is a candidate nor beats anyone."""
    points = pa.table(
        {
            "tokens_per_s_per_user": [1.0, 2.0, 1.0, 2.0, 0.0, 5.0, 4.0],
            "tokens_per_s_per_gpu": [1.0, 1.0, 2.0, 2.0, 3.0, 5.0, 4.0],
            "fits": [True, True, True, True, True, False, True],
            "layout_problems": [None, None, None, None, None, None, "tp8 > heads"],
        }
    )
    frontier = pareto(points)
    rows = frontier.select(["tokens_per_s_per_user", "tokens_per_s_per_gpu"]).to_pylist()
    assert [tuple(r.values()) for r in rows] == [(0.0, 3.0), (2.0, 2.0)]
