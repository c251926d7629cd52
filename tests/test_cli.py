"""The `archsql` command line, driven through click's CliRunner against a temp store.

Hand-derived number used below (Meta-Llama-3.1-8B, archsql/specs/configs/
meta-llama__Meta-Llama-3.1-8B.json): hidden_size d_model = 4096, num_attention_heads
n_heads = 32, no head_dim key so d_head = 4096 // 32 = 128, num_hidden_layers = 32.
q_proj is a linear d_model → n_heads·d_head, so one layer costs
2·B·s·d_model·(n_heads·d_head) = 2·1·1·4096·(32·128) = 33,554,432 FLOPs at B = s = 1,
and the 32 layers together 32 · 33,554,432 = 1,073,741,824 FLOPs.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.output import human, human_bytes

MODELS = ("Qwen3-0.6B", "Meta-Llama-3.1-8B")
Q_PROJ_FLOPS = 2 * 1 * 1 * 4096 * (32 * 128) * 32  # = 1_073_741_824, see the module docstring


def run(db: Path, *args: str):
    # a 160-column terminal: tables as tables (at 80 a wide one turns into records, test_cli_output)
    return CliRunner().invoke(cli, ["--db", str(db), *args], env={"COLUMNS": "160"})


def assert_user_error(result, *fragments: str) -> None:
    """Exit code 2, the message on stderr, no traceback anywhere."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "store.duckdb"
    result = run(path, "build", *MODELS)
    assert result.exit_code == 0, result.output
    return path


def test_build_prints_the_summary(db: Path) -> None:
    result = run(db, "build", *MODELS)  # rebuilding replaces the same models' rows
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 models in" in out and re.search(r"built 2 models in \d+\.\d\d s", out)
    llama = next(line for line in out.splitlines() if "Meta-Llama-3.1-8B" in line)
    # 8,030,261,248 params; KV per token 2 (K, V) · 8 kv heads · 128 · 32 layers · 2 bytes = 128 KiB
    assert "8.03 B" in llama and "32" in llama and "4096" in llama and "128 KiB" in llama
    qwen = next(line for line in out.splitlines() if "Qwen3-0.6B" in line)
    assert "596 M" in qwen and "1024" in qwen


def test_sql_table_csv_json(db: Path) -> None:
    query = "select model, params, layers from model_summary order by params desc"
    table = run(db, "sql", query)
    assert table.exit_code == 0, table.output
    # the table is for a person: params in K/M/B (8,030,261,248 → 8.03 B); csv/json keep them exact
    assert "Meta-Llama-3.1-8B" in table.stdout and "8.03 B" in table.stdout

    rows = list(csv.DictReader(io.StringIO(run(db, "sql", query, "--format", "csv").stdout)))
    assert [r["model"] for r in rows] == ["Meta-Llama-3.1-8B", "Qwen3-0.6B"]
    assert rows[0]["params"] == "8030261248" and rows[0]["layers"] == "32"

    data = json.loads(run(db, "sql", query, "--format", "json").stdout)
    assert data[0] == {"model": "Meta-Llama-3.1-8B", "params": 8030261248, "layers": 32}


def test_sql_csv_writes_list_columns_as_json(db: Path) -> None:
    query = "select name, shape from weights where model = 'Meta-Llama-3.1-8B' and uid like '%q_proj'"
    rows = list(csv.DictReader(io.StringIO(run(db, "sql", query, "--format", "csv").stdout)))
    assert rows == [{"name": "model.layers.{layer}.self_attn.q_proj.weight", "shape": "[4096, 4096]"}]


def test_sql_parquet_to_a_file(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "summary.parquet"
    result = run(db, "sql", "select model, params from model_summary", "--format", "parquet", "--output", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == ["model", "params"]
    assert dict(zip(*table.to_pydict().values(), strict=True))["Qwen3-0.6B"] == 596049920


def test_sql_parquet_needs_output(db: Path) -> None:
    result = run(db, "sql", "select 1", "--format", "parquet")
    assert result.exit_code == 2 and "--output" in result.stderr


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("drop table models", "only read queries"),
        ("copy models to 'x.csv'", "only read queries"),
        ("select * from 'x.csv'", "only queries the store"),
    ],
)
def test_sql_refuses_writes_and_files(db: Path, query: str, fragment: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(db, "sql", query)
    assert_user_error(result, "error:", fragment)
    assert not (tmp_path / "x.csv").exists()
    assert run(db, "sql", "select count(*) as n from models", "--format", "csv").stdout.split() == ["n", "2"]


def test_sql_bad_query_is_a_clean_error(db: Path) -> None:
    assert_user_error(run(db, "sql", "select * from no_such_view"), "query failed")


def test_saved_queries(db: Path) -> None:
    from archsql.queries import saved

    listing = run(db, "query")
    assert listing.exit_code == 0, listing.output
    assert all(name in listing.stdout for name in saved())
    rows = json.loads(run(db, "query", "summary", "--format", "json").stdout)
    assert {r["model"] for r in rows} == set(MODELS)
    assert_user_error(run(db, "query", "sumary"), "did you mean 'summary'")


def test_sql_without_a_store_says_to_build(tmp_path: Path) -> None:
    assert_user_error(run(tmp_path / "missing.duckdb", "sql", "select 1"), "archsql build")


def test_unknown_model_did_you_mean(tmp_path: Path) -> None:
    db = tmp_path / "never.duckdb"
    assert_user_error(run(db, "build", "Qwen3-0.5B"), "unknown model 'Qwen3-0.5B'", "did you mean 'Qwen3-0.6B'")
    assert not db.exists()  # rejected before any work
    assert_user_error(run(db, "explain", "Meta-Llama-3.1-8", "flops"), "did you mean 'Meta-Llama-3.1-8B'")


def test_export_parquet_writes_every_table_and_view(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    result = run(db, "export", "--parquet", str(out))
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        relations = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables "
                "where table_catalog = current_database() and table_schema = 'main'"
            ).fetchall()
        }
        n_summary = con.execute("select count(*) from model_summary").fetchone()[0]
    finally:
        con.close()
    assert {"models", "terms", "workloads", "model_summary", "flops", "kv_per_token"} <= relations
    assert {p.stem for p in out.glob("*.parquet")} == relations
    assert pq.read_table(out / "model_summary.parquet").num_rows == n_summary == 2


def test_explain_q_proj_flops_by_hand() -> None:
    result = CliRunner().invoke(
        cli, ["explain", "Meta-Llama-3.1-8B", "flops", "-s", "1", "-c", "1", "--node", "q_proj"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2·B·d_head·d_model·n_heads·n_layers·s" in out
    assert "B = 1, s = 1, c = 1" in out
    value = int(re.search(r"value\s+(\d+)", out).group(1))
    assert value == Q_PROJ_FLOPS == 1_073_741_824


def test_explain_bad_workload_is_a_clean_error() -> None:
    result = CliRunner().invoke(cli, ["explain", "Meta-Llama-3.1-8B", "flops", "-s", "8", "-c", "4"])
    assert_user_error(result, "context (4) must be at least the new tokens (8)")


def test_models_lists_the_catalog() -> None:
    from archsql.api import catalog

    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0, result.output
    for name in catalog():
        assert name in result.stdout


def test_number_formats() -> None:
    assert human(8_030_261_248) == "8.03 B"
    assert human(596_049_920) == "596 M"
    assert human(405_853_388_800) == "406 B"
    assert human(1_238_421_733_376) == "1.24 T"
    assert human(32) == "32"
    assert human_bytes(131_072) == "128 KiB"
    assert human_bytes(516_096) == "504 KiB"
    assert human_bytes(512) == "512 B"


def test_lazy_commands_are_every_command_their_modules_define():
    """`archsql` loads the design, kernel-corpus and site commands on first use, by name: each
    name is its command's, and every command those modules give is listed."""
    import importlib

    from archsql.author.cli import COMMANDS as AUTHOR_COMMANDS
    from archsql.cli import LAZY_COMMANDS
    from archsql.design.cli import COMMANDS

    for name, (module, attr) in LAZY_COMMANDS.items():
        assert getattr(importlib.import_module(module), attr).name == name
    assert {c.name for c in (*COMMANDS, *AUTHOR_COMMANDS)} | {"corpus", "bench", "site", "report", "kernels"} == set(
        LAZY_COMMANDS
    )
    assert set(LAZY_COMMANDS) <= set(cli.list_commands(None))
