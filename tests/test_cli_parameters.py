"""Parameters without raw SQL (issue 13 item 3): ``archsql deployment|workload|gpu`` and the
same in the Python API.  Each command writes a row that the views then answer for, and each
bad row is refused with its field named, leaving the store as it was.

Expected values are derived here from the inputs and from the facts files (gpus.csv, the
model's config.json), not read back from the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import archsql.defaults
from archsql import api
from archsql.cli import cli
from archsql.errors import EXIT_USER_ERROR, ParameterError
from archsql.gpus.table import GPUS_CSV
from archsql.specs import default_library

MODEL = "Qwen3-0.6B"


@pytest.fixture()
def db(store_of, tmp_path) -> Path:
    """A private copy of a one-model store with the default parameter tables."""
    path = tmp_path / "store.duckdb"
    shutil.copy(store_of(MODEL), path)
    return path


def run(db: Path, *args: str):
    return CliRunner().invoke(cli, ["--db", str(db), *args])


def rows(db: Path, sql: str) -> list[dict]:
    return api.query(sql, db=db).to_pylist()


def user_error(result, *fragments: str) -> None:
    assert result.exit_code == EXIT_USER_ERROR, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def _gpu_csv(name: str) -> dict[str, str]:
    with GPUS_CSV.open(encoding="utf-8") as f:
        return next(r for r in csv.DictReader(f) if r["gpu"] == name)


# ---------------------------------------------------------------------------- deployments


def test_deployment_add_derives_gpus_and_the_views_answer(db: Path) -> None:
    result = run(db, "deployment", "add", "mine", "--gpu", "H200 SXM", "--tp", "4", "--dp", "2")
    assert result.exit_code == 0, result.output
    [row] = rows(db, "select * from deployments where deployment = 'mine'")
    # gpus not given: the attention degrees' product tp · cp · dp · pp = 4 · 1 · 2 · 1 = 8
    assert row["gpus"] == 4 * 1 * 2 * 1
    assert (row["cp_kind"], row["weight_dtype"], row["kv_dtype"], row["weight_profile"]) == (
        "none",
        "bf16",
        "bf16",
        "bf16",
    )
    # moe_tp not given: what ep · pp = 1 leave of the 8 GPUs
    mesh = {r["axis"]: r["degree"] for r in rows(db, "select * from deployment_mesh where deployment = 'mine'")}
    assert mesh == {"tp": 4, "dp": 2, "moe_tp": 8 // 1}
    assert rows(db, "select * from deployment_checks where deployment = 'mine'") == []
    # the framework default (vLLM gpu_memory_utilization 0.9, defaults/frameworks.csv) applies to
    # the device memory gpus.csv reports: usable = device_memory_MiB · 2^20 · 0.9
    device_mib = float(_gpu_csv("H200 SXM")["device_memory_MiB"])
    [memory] = rows(db, "select usable_bytes from device_memory where deployment = 'mine' and workload = 'prefill_2k'")
    assert memory["usable_bytes"] == pytest.approx(device_mib * 2**20 * 0.9, rel=1e-12)
    assert rows(db, "select count(*) as n from step_sol where deployment = 'mine'")[0]["n"] > 0


def test_deployment_list_csv_has_every_column(db: Path) -> None:
    assert (
        run(db, "deployment", "add", "mine", "--gpu", "H200 SXM", "--tp", "4", "--dp", "2", "--ep", "8").exit_code == 0
    )
    result = run(db, "deployment", "list", "--format", "csv")
    assert result.exit_code == 0, result.output
    listed = {r["deployment"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert listed["mine"]["mesh"] == "tp4·dp2·ep8" and listed["mine"]["framework"] == "vllm"
    with (Path(archsql.defaults.__file__).parent / "deployments.csv").open(encoding="utf-8") as f:
        shipped = {r["deployment"] for r in csv.DictReader(f)}
    assert set(listed) == shipped | {"mine"}


def test_unknown_gpu_did_you_mean(db: Path) -> None:
    before = rows(db, "select count(*) as n from deployments")
    result = run(db, "deployment", "add", "x", "--gpu", "H200 SXN", "--tp", "8")
    user_error(result, "deployments.gpu", "unknown GPU 'H200 SXN'", "did you mean 'H200 SXM'?")
    assert rows(db, "select count(*) as n from deployments") == before


def test_dp_and_moe_tp_fill_the_gpus(db: Path) -> None:
    # the sweep's rule (schema.parallel.fill_degrees): dp = gpus / (tp · cp · pp) = 8 / 4 = 2 and
    # moe_tp = gpus / (ep · pp) = 8 / 1 = 8 when not given
    assert run(db, "deployment", "add", "fill", "--gpu", "H200 SXM", "--gpus", "8", "--tp", "4").exit_code == 0
    mesh = {r["axis"]: r["degree"] for r in rows(db, "select * from deployment_mesh where deployment = 'fill'")}
    assert mesh == {"tp": 4, "dp": 8 // 4, "moe_tp": 8 // 1}


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        # dp given: tp · cp · dp · pp = 4 · 1 · 1 · 1 = 4 of 8 GPUs (moe_tp fills 8)
        (
            ["--gpus", "8", "--tp", "4", "--dp", "1"],
            ["tp × cp × dp × pp = 4 × 1 × 1 × 1 = 4 GPUs, the deployment has 8"],
        ),
        # 3 does not divide 8, so dp is not filled (1): 3 · 1 · 1 · 1 = 3; ep 8 · moe_tp 1 · pp 1 = 8 holds
        (
            ["--gpus", "8", "--tp", "3", "--ep", "8"],
            ["tp × cp × dp × pp = 3 × 1 × 1 × 1 = 3 GPUs, the deployment has 8"],
        ),
        # ep 16 on 8 GPUs: moe_tp is not filled (1): 16 · 1 · 1 = 16
        (["--tp", "8", "--ep", "16"], ["ep × moe_tp × pp = 16 × 1 × 1 = 16 GPUs, the deployment has 8"]),
    ],
)
def test_degrees_that_do_not_multiply_to_the_gpus(db: Path, args: list[str], fragments: list[str]) -> None:
    result = run(db, "deployment", "add", "x", "--gpu", "H200 SXM", *args)
    # the deployment_checks rules, located, with their fix
    user_error(result, "breaks the layout rules", *fragments, "hint: make")
    assert rows(db, "select * from deployments where deployment = 'x'") == []
    assert rows(db, "select * from deployment_mesh where deployment = 'x'") == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--tp", "0"], "deployment_mesh.tp: tp must be at least 1"),
        (["--gpus", "-8"], "deployments.gpus: gpus must be at least 1"),
        (["--usable-memory-fraction", "1.5"], "usable_memory_fraction 1.5 is outside (0, 1]"),
        (["--cp", "2", "--tp", "4"], "cp = 2 with cp_kind = none"),
        (["--kv-dtype", "fp9"], "unknown dtype"),
        (["--framework", "vlm"], "did you mean 'vllm'?"),
    ],
)
def test_bad_deployment_fields_are_located(db: Path, args: list[str], fragment: str) -> None:
    user_error(run(db, "deployment", "add", "x", "--gpu", "H200 SXM", *args), fragment)
    assert rows(db, "select * from deployments where deployment = 'x'") == []


def test_duplicate_refused_replace_and_like(db: Path) -> None:
    user_error(run(db, "deployment", "add", "8xH200-tp8", "--gpu", "H200 SXM"), "already in the store", "--replace")
    result = run(db, "deployment", "add", "tp8-kvfp8", "--like", "8xH200-tp8", "--kv-dtype", "fp8")
    assert result.exit_code == 0, result.output
    [base] = rows(db, "select * exclude (deployment) from deployments where deployment = '8xH200-tp8'")
    [copy] = rows(db, "select * exclude (deployment) from deployments where deployment = 'tp8-kvfp8'")
    assert copy == {**base, "kv_dtype": "fp8"}
    mesh = "select axis, degree from deployment_mesh where deployment = '{}' order by axis"
    assert rows(db, mesh.format("tp8-kvfp8")) == rows(db, mesh.format("8xH200-tp8"))
    user_error(run(db, "deployment", "add", "y", "--like", "8xH200-tp9"), "did you mean '8xH200-tp8'?")
    assert run(db, "deployment", "add", "tp8-kvfp8", "--like", "8xH200-tp8", "--replace").exit_code == 0
    assert rows(db, "select kv_dtype from deployments where deployment = 'tp8-kvfp8'") == [{"kv_dtype": "bf16"}]


def test_deployment_rm(db: Path) -> None:
    assert run(db, "deployment", "add", "mine", "--gpu", "H200 SXM", "--tp", "8").exit_code == 0
    result = run(db, "deployment", "rm", "mine")
    assert result.exit_code == 0 and "removed deployment mine" in result.stdout
    for table in ("deployments", "deployment_mesh", "deployment_frameworks"):
        assert rows(db, f"select * from {table} where deployment = 'mine'") == []
    user_error(run(db, "deployment", "rm", "8xH200-tp88", "1xH200-single"), "did you mean '8xH200-tp8'?")
    assert rows(db, "select count(*) as n from deployments where deployment = '1xH200-single'") == [{"n": 1}]


def test_api_deployments(db: Path) -> None:
    row = api.add_deployment("api-tp2", db, gpu="H200 SXM", tp=2).to_pylist()[0]
    assert row["gpus"] == 2 and row["mesh"] == "tp2·moe_tp2"
    with pytest.raises(ParameterError, match="did you mean 'tp'"):
        api.add_deployment("bad", db, gpu="H200 SXM", tpp=2)
    assert "api-tp2" in api.deployments(db).column("deployment").to_pylist()
    assert api.remove_deployments(["api-tp2"], db) == ["api-tp2"]
    assert "api-tp2" not in api.deployments(db).column("deployment").to_pylist()


# ---------------------------------------------------------------------------- workloads


def test_workload_add_and_the_views_answer(db: Path) -> None:
    result = run(db, "workload", "add", "decode_b32_c32k", "--phase", "decode", "--batch", "32", "--context", "32k")
    assert result.exit_code == 0, result.output
    # 32k = 32 · 1024 tokens; a decode step computes 1 new token per request by default
    assert rows(db, "select * from workloads where workload = 'decode_b32_c32k'") == [
        {"workload": "decode_b32_c32k", "phase": "decode", "batch": 32, "new_tokens": 1, "context": 32 * 1024}
    ]
    flops = rows(db, f"select flops from flops where workload = 'decode_b32_c32k' and model = '{MODEL}'")
    assert len(flops) == 1 and flops[0]["flops"] > 0
    result = run(db, "workload", "add", "p2k_img", "--phase", "prefill", "--context", "2k", "--image-patches", "4096")
    assert result.exit_code == 0, result.output
    listed = {r["workload"]: r for r in json.loads(run(db, "workload", "list", "--format", "json").stdout)}
    # prefill computes every token of its context by default: s = c = 2048
    assert listed["p2k_img"] == {
        "workload": "p2k_img",
        "phase": "prefill",
        "batch": 1,
        "new_tokens": 2048,
        "context": 2048,
        "image_patches": 4096,
    }
    assert run(db, "workload", "rm", "p2k_img").exit_code == 0
    assert rows(db, "select * from workload_images where workload = 'p2k_img'") == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--phase", "decode", "--batch", "0", "--context", "8k"], "workloads.batch: batch must be at least 1"),
        (["--phase", "decode", "--batch", "-5", "--context", "8k"], "batch must be at least 1"),
        (["--phase", "decode", "--context", "-1"], "workloads.context: context must be at least 1"),
        (["--phase", "prefill", "--context", "1k", "--new-tokens", "2k"], "context (1024) is less than the new tokens"),
        (["--phase", "decode", "--context", "1k", "--image-patches", "-1"], "image_patches must be at least 0"),
        (["--phase", "decode", "--context", "8x"], "is not an integer"),
    ],
)
def test_bad_workloads_are_located(db: Path, args: list[str], fragment: str) -> None:
    result = run(db, "workload", "add", "bad", *args)
    user_error(result, fragment)
    assert rows(db, "select * from workloads where workload = 'bad'") == []


def test_workload_phase_and_duplicates(db: Path) -> None:
    with pytest.raises(ParameterError, match="did you mean 'decode'"):
        api.add_workload("w", db, phase="decod", context=8)
    user_error(
        run(db, "workload", "add", "prefill_2k", "--phase", "prefill", "--context", "2k"), "already in the store"
    )
    user_error(run(db, "workload", "rm", "prefill_2kk"), "did you mean 'prefill_2k'?")


def test_context_beyond_the_models_maximum_is_flagged(db: Path) -> None:
    config = json.loads((default_library().configs_dir / "Qwen__Qwen3-0.6B.json").read_text(encoding="utf-8"))
    limit = config["max_position_embeddings"]  # 40960 in the shipped config
    result = run(db, "workload", "add", "long", "--phase", "decode", "--context", str(2 * limit))
    assert result.exit_code == 0, result.output
    assert f"beyond the maximum context of 1 model(s) in the store: {MODEL} ({limit})" in result.stderr
    flagged = rows(db, "select distinct beyond_max_context from step_sol where workload = 'long'")
    assert flagged == [{"beyond_max_context": True}]
    within = run(db, "workload", "add", "short", "--phase", "decode", "--context", str(limit))
    assert within.exit_code == 0 and "beyond" not in within.stderr


# ---------------------------------------------------------------------------- GPUs


def test_gpu_add_like_and_use(db: Path) -> None:
    result = run(
        db, "gpu", "add", "H200 fast", "--like", "H200 SXM", "--set", "mem_bandwidth_TBps=9.6", "--set", "sources=test"
    )
    assert result.exit_code == 0, result.output
    [row] = rows(db, "select * from gpus where gpu = 'H200 fast'")
    h200 = _gpu_csv("H200 SXM")
    assert row["mem_bandwidth_TBps"] == 9.6 and row["device_memory_MiB"] == float(h200["device_memory_MiB"])
    assert row["sources"] == "test" and row["flags"] is None  # sources and flags are not copied
    assert run(db, "deployment", "add", "fast", "--gpu", "H200 fast").exit_code == 0
    # one GPU, bandwidth doubled (4.8 → 9.6 TB/s, gpus.csv): a decode step that is memory-bound on
    # both takes half the memory time
    assert float(h200["mem_bandwidth_TBps"]) * 2 == 9.6
    times = {
        r["deployment"]: r["memory_s"]
        for r in rows(
            db,
            "select deployment, memory_s from step_sol where workload = 'decode_b1_c2k' "
            "and deployment in ('fast', '1xH200-single')",
        )
    }
    assert times["fast"] == pytest.approx(times["1xH200-single"] / 2, rel=1e-9)
    listed = list(csv.DictReader(io.StringIO(run(db, "gpu", "list", "--format", "csv").stdout)))
    assert "H200 fast" in {r["gpu"] for r in listed} and "tdp_w" in listed[0]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--like", "H200 SXM"], "sources must cite"),
        (
            ["--like", "H200 SXM", "--set", "sources=x", "--set", "mem_bandwith_TBps=5"],
            "did you mean 'mem_bandwidth_TBps'",
        ),
        (["--like", "H200 SXM", "--set", "sources=x", "--set", "mem_bandwidth_TBps=-1"], "must be a positive number"),
        (["--like", "H200 SMX", "--set", "sources=x"], "did you mean 'H200 SXM'"),
        (["--set", "sources"], "is not COLUMN=VALUE"),
    ],
)
def test_bad_gpus_are_located(db: Path, args: list[str], fragment: str) -> None:
    user_error(run(db, "gpu", "add", "G", *args), fragment)
    assert rows(db, "select * from gpus where gpu = 'G'") == []


# ---------------------------------------------------------------------------- sql and --db


@pytest.mark.parametrize(
    ("statement", "command"),
    [
        ("insert into deployments (deployment) values ('x')", "archsql deployment add"),
        ("delete from deployment_mesh", "archsql deployment add"),
        ("update workloads set batch = 0", "archsql workload add"),
        ("insert into workload_images values ('prefill_2k', 1)", "archsql workload add --image-patches"),
        ("delete from gpus", "archsql gpu add"),
        ("drop table models", "archsql deployment|workload|gpu add|rm"),
    ],
)
def test_sql_write_names_the_command(db: Path, statement: str, command: str) -> None:
    user_error(run(db, "sql", statement), "only read queries", command)


def test_db_after_the_subcommand(db: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./archsql.duckdb: only --db can find the store
    monkeypatch.delenv("ARCHSQL_DB", raising=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["sql", "select count(*) as n from deployments", "--db", str(db), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["n", str(len(rows(db, "select * from deployments")))]
    result = runner.invoke(cli, ["deployment", "list", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout)
    # the option after the subcommand wins over the one before it
    result = runner.invoke(cli, ["--db", str(tmp_path / "none.duckdb"), "workload", "list", "--db", str(db)])
    assert result.exit_code == 0, result.output
