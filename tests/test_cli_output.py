"""Readable output everywhere (issue 13 item 5): human units in table output with the exact
values kept in csv/json, no table wider than the terminal (80 and 160 columns), ``--format``
on every command that prints rows, zero deltas as exact zero, ``--db`` after the subcommand,
shell completion.

Expected strings are derived in the test from the values and the unit rules (1 ms = 1e-3 s,
1 GiB = 2^30 B, 1 TFLOP = 1e12 FLOP).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from archsql import api
from archsql.cli import cli
from archsql.output import delta, human_bytes, human_flops, human_seconds, unit_of

MODEL = "Qwen3-0.6B"
README = Path(__file__).parents[1] / "README.md"


@pytest.fixture(scope="module")
def db(store_of) -> Path:
    return store_of(MODEL)


def run(*args: str, columns: int | None = None):
    env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
    return CliRunner().invoke(cli, list(args), env=env)


def widest(text: str) -> int:
    return max((cell_len(line.rstrip()) for line in text.splitlines()), default=0)


# ---------------------------------------------------------------------------- units


def test_unit_rules() -> None:
    assert human_seconds(0.00335) == "3.35 ms"  # 3.35e-3 s / 1e-3
    assert human_seconds(6.86e-5) == "68.6 µs"  # 6.86e-5 s / 1e-6
    assert human_seconds(4.74) == "4.74 s"
    assert human_seconds(0) == "0 s"
    assert human_flops(2.1e12) == "2.1 TFLOP"  # 2.1e12 / 1e12
    assert human_flops(4.5e9) == "4.5 GFLOP"
    assert human_bytes(141 * 2**30) == "141 GiB"
    assert human_bytes(-(3 * 2**29)) == "-1.5 GiB"  # 3 · 2^29 = 1.5 · 2^30
    # the unit of a column is read from its name; a rate is not a time
    assert [unit_of(c) for c in ("time_s", "tokens_per_s", "kv_bytes", "bytes_per_request", "flops")] == [
        "s",
        None,
        "bytes",
        "bytes",
        "FLOP",
    ]
    assert [unit_of(c) for c in ("flops_per_new_token", "active_params", "batch", "tokens_per_s_per_gpu")] == [
        "FLOP",
        "count",
        None,
        None,
    ]


def test_deltas_print_exact_zero() -> None:
    assert delta(0) == "0" and delta(0.0) == "0" and delta(-0.0) == "0"
    assert delta(2**30, human_bytes) == "+1 GiB"
    assert delta(-0.5e-3, human_seconds) == "-500 µs"


def test_table_in_units_csv_and_json_exact(db: Path) -> None:
    query = (
        "select model, deployment, workload, time_s, flops, weight_bytes from step_sol "
        "join flops using (model, workload) join device_memory using (model, deployment, workload) "
        "where deployment = '1xH200-single' and workload = 'prefill_2k'"
    )
    [exact] = api.query(query, db=db).to_pylist()
    table = run("--db", str(db), "sql", query)
    assert table.exit_code == 0, table.output
    line = next(x for x in table.stdout.splitlines() if MODEL in x)
    assert human_seconds(exact["time_s"]) in line and human_seconds(exact["time_s"]).endswith("ms")
    assert human_flops(exact["flops"]) in line and "TFLOP" in line
    assert human_bytes(exact["weight_bytes"]) in line and "GiB" in line
    [row] = list(csv.DictReader(io.StringIO(run("--db", str(db), "sql", query, "--format", "csv").stdout)))
    assert float(row["time_s"]) == exact["time_s"] and float(row["weight_bytes"]) == exact["weight_bytes"]
    assert float(row["flops"]) == exact["flops"]
    [data] = json.loads(run("--db", str(db), "sql", query, "--format", "json").stdout)
    assert data == exact  # floats round-trip through JSON exactly


def test_negative_zero_prints_as_zero(db: Path) -> None:
    out = run("--db", str(db), "sql", "select -0.0 as d, 0.0 as e").stdout
    assert "-0" not in out and "0.0" not in out and "│ 0 │" in out


# ---------------------------------------------------------------------------- widths


@pytest.mark.parametrize("columns", [80, 160])
@pytest.mark.parametrize(
    "args",
    [
        ["sql", "select * from step_sol limit 5"],
        ["sql", "select * from device_memory limit 3"],
        ["sql", "select model, deployment, workload, time_s, tokens_per_s from step_sol limit 5"],
        ["query", "summary"],
        ["query"],
        ["deployment", "list"],
        ["workload", "list"],
        ["gpu", "list"],
        ["models"],
    ],
)
def test_no_table_wider_than_the_terminal(db: Path, args: list[str], columns: int) -> None:
    result = run("--db", str(db), *args, columns=columns)
    assert result.exit_code == 0, result.output
    assert widest(result.stdout) <= columns, result.stdout
    if args == ["models"]:  # the first column (the row's name) is never wrapped or cut
        assert all(name in result.stdout for name in api.catalog())
    else:  # nothing is cut off with an ellipsis: wrapped, or one record per row
        assert "…" not in result.stdout


def test_too_wide_becomes_records_and_wide_enough_stays_a_table(db: Path) -> None:
    query = "select * from step_sol where workload = 'decode_b1_c2k' and deployment = '1xH200-single'"
    [exact] = api.query(query, db=db).to_pylist()
    narrow = run("--db", str(db), "sql", query, columns=80).stdout
    assert "row 1" in narrow and "┃" not in narrow  # a vertical record
    field = next(line for line in narrow.splitlines() if line.startswith("memory_s"))
    assert field.split()[1:] == human_seconds(exact["memory_s"]).split()
    few = "select model, workload, time_s from step_sol where deployment = '1xH200-single'"
    wide = run("--db", str(db), "sql", few, columns=160).stdout
    assert "row 1" not in wide and "time_s" in wide.splitlines()[1]  # a table, header on one line


# ---------------------------------------------------------------------------- --format everywhere


def test_models_format() -> None:
    data = json.loads(run("models", "--format", "json").stdout)
    assert [r["model"] for r in data] == api.catalog()
    assert set(data[0]) == {"model", "hf_id", "spec_file", "description"}
    rows = list(csv.DictReader(io.StringIO(run("models", "--format", "csv").stdout)))
    assert len(rows) == len(api.catalog())


def test_build_format_json_is_exact(db: Path, tmp_path: Path) -> None:
    result = run("--db", str(tmp_path / "s.duckdb"), "build", MODEL, "--format", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)  # the progress and timing line went to stderr
    [summary] = api.query(f"select * from model_summary where model = '{MODEL}'", db=db).to_pylist()
    assert row["params"] == summary["params"] and "built 1 model" in result.stderr


def test_saved_query_list_and_export_format(db: Path, tmp_path: Path) -> None:
    listed = {r["query"] for r in csv.DictReader(io.StringIO(run("query", "--format", "csv").stdout))}
    assert "summary" in listed
    result = run("--db", str(db), "export", "--parquet", str(tmp_path / "out"), "--format", "json")
    assert result.exit_code == 0, result.output
    files = {r["name"]: r for r in json.loads(result.stdout)}
    assert files["models"]["rows"] == 1 and Path(files["models"]["file"]).is_file()


def test_db_after_the_subcommand(db: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCHSQL_DB", raising=False)
    result = run("query", "summary", "--db", str(db), "--format", "csv")
    assert result.exit_code == 0, result.output
    assert [r["model"] for r in csv.DictReader(io.StringIO(result.stdout))] == [MODEL]


def test_shell_completion_is_documented_and_works() -> None:
    readme = README.read_text(encoding="utf-8")
    assert "_ARCHSQL_COMPLETE=bash_source archsql" in readme
    result = CliRunner().invoke(cli, [], prog_name="archsql", env={"_ARCHSQL_COMPLETE": "bash_source"})
    assert result.exit_code == 0 and "_ARCHSQL_COMPLETE" in result.output and "complete" in result.output
