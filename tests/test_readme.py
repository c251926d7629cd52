"""The README runs: every ```bash block (Quickstart, querying, workloads, deployments, sweeps,
design commands, adding a model) runs in a fresh folder against a fresh copy of a store, the
```python block runs, and a ```console block that shows a command prints what it shows.

Installation is assumed (the package under test is this checkout, on PYTHONPATH): the
Quickstart's `pip install . && archsql build` and `pip install '.[test]' && python -m
pytest` are its two commands, so the build it runs is the store below, of the models the
examples ask about (the whole catalog's build is the `catalog_db` fixture's), and the test
suite is this file's own caller.  ```sh blocks need files of the reader's own (checkpoints,
a transformers checkout) and are not run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
# the models the README's queries, sweeps and explanations name, in the order of the store
# tests/test_fusion_rules.py and test_fusion_kernels.py read: one build per test run
STORE_MODELS = ("Meta-Llama-3.1-8B", "Qwen3-30B-A3B", "DeepSeek-V3")
# lines that install the package or run the test suite (see the module docstring), and the
# lines that start Spark, which the Spark tests run when asked (ARCHSQL_SPARK_TESTS=1,
# tests/test_spark.py): a Spark session costs half a minute of the suite's two cores
NOT_RUN = re.compile(
    r"^\s*(pip install|python -m pytest)" + ("" if os.environ.get("ARCHSQL_SPARK_TESTS") else r"|.*--engine spark")
)

pytestmark = pytest.mark.slow


def blocks(language: str) -> list[tuple[str, str]]:
    """(the section heading above it, its text) of every ```language block of the README."""
    text = README.read_text(encoding="utf-8")
    out = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S):
        heading = re.findall(r"^#+ (.+)$", text[: match.start()], flags=re.M)[-1]
        out.append((heading, match.group(1)))
    return out


def test_every_shell_block_is_run_or_says_why_not():
    """A block of commands is bash (run here) or sh (needs the reader's files: named paths)."""
    text = README.read_text(encoding="utf-8")
    languages = set(re.findall(r"^```(\w+)$", text, flags=re.M))
    assert languages <= {"bash", "sh", "console", "python", "yaml"}, languages
    for _, block in blocks("sh"):
        assert "path/to/" in block  # a placeholder for the reader's own file


@pytest.fixture(scope="module")
def store(store_of):
    return store_of(*STORE_MODELS)


def _env(tmp_path: Path, store: Path) -> dict[str, str]:
    db = tmp_path / "archsql.duckdb"
    shutil.copy(store, db)
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ARCHSQL_DB": str(db),
        "ARCHSQL_DESIGN_DB": str(tmp_path / "archsql-design.duckdb"),
        "COLUMNS": "200",
        "PYTHON": sys.executable,
    }


def _bash(script: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # a command that fails stops the block, except with exit code 1: a verdict (`audit` says
    # reject, `validate` not publishable), which the README's examples show on purpose
    prelude = (
        'set -uo pipefail\ntrap \'rc=$?; [ $rc -eq 1 ] || exit $rc\' ERR\narchsql() { "$PYTHON" -m archsql "$@"; }\n'
    )
    return subprocess.run(
        ["bash", "-c", prelude + script + "\ntrue\n"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize(("heading", "block"), blocks("bash"), ids=[h for h, _ in blocks("bash")])
def test_bash_block_runs(heading, block, store, tmp_path):
    script = "\n".join(line for line in block.splitlines() if not NOT_RUN.match(line))
    result = _bash(script, tmp_path, _env(tmp_path, store))
    assert result.returncode == 0, f"{heading}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_python_block_runs(tmp_path, store):
    ((heading, code),) = blocks("python")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path, store), capture_output=True, text=True
    )
    assert result.returncode == 0, f"{heading}:\n{result.stderr[-3000:]}"


def test_console_blocks_print_what_they_show(tmp_path, store):
    shown = [(h, b) for h, b in blocks("console") if b.startswith("$ archsql ")]
    assert shown
    for heading, block in shown:
        command, *expected = block.rstrip("\n").splitlines()
        result = _bash(command.removeprefix("$ "), tmp_path, _env(tmp_path, store))
        assert result.returncode == 0, result.stderr
        assert [line.rstrip() for line in result.stdout.rstrip("\n").splitlines()] == expected, heading
