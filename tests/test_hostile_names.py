"""Hostile names and paths (issue 19 class 6), each input built here:

- model and tensor names holding terminal escape sequences (clear the screen ``ESC[2J``, set the
  window title ``ESC]0;…BEL``) were printed raw by ``build``, ``sql`` and ``checkpoint``; now every
  control character reaches the terminal escaped (archsql.output.printable), while csv/json keep
  the exact name (JSON escapes it as ``\\u001b`` itself);
- a safetensors index whose ``weight_map`` points outside the checkpoint folder (``/etc/passwd``,
  ``../x``) made archsql open that file and print its first 8 bytes as an integer (the header
  length); now the index is refused before any such file is opened, and nothing of it is shown;
- ``archsql query ../../…/evil`` ran any ``.sql`` file; now a saved query is a name of
  archsql/queries, with a "did you mean" among them.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import EXIT_USER_ERROR, CheckpointError
from archsql.ingest.checkpoint import read_checkpoint
from archsql.output import printable
from archsql.queries import QUERIES_DIR, saved

ESC = "\x1b"
CLEAR = f"{ESC}[2J{ESC}[H"  # erase the screen, cursor home
TITLE = f"{ESC}]0;pwned\x07"  # set the window title (OSC 0 … BEL)
HOSTILE = f"{TITLE}{CLEAR}evil\u202e"  # and a right-to-left override


def _cli(*args: str):
    # a wide terminal: an escaped name stays on one line of its table cell
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "250"})


def _no_controls(text: str) -> None:
    assert ESC not in text and "\x07" not in text and "\u202e" not in text, repr(text)


def _safetensors(path: Path, names: list[str]) -> Path:
    """A valid safetensors file: one BF16 [2, 2] tensor (8 bytes) per name, back to back."""
    header = {
        name: {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8 * i, 8 * i + 8]} for i, name in enumerate(names)
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8 * len(names)))
    return path


def test_printable_escapes_every_control_character() -> None:
    assert printable(HOSTILE) == "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[Hevil\\u202e"
    assert printable("a\nb\tc") == "a\\nb\\tc"
    assert printable("line 1\nline 2", newlines=True) == "line 1\nline 2"
    assert printable("DeepSeek-V3 · 8×H200 µs") == "DeepSeek-V3 · 8×H200 µs"  # printable text unchanged


def test_checkpoint_tensor_names_are_escaped(tmp_path: Path) -> None:
    file = _safetensors(tmp_path / "model.safetensors", [f"model.{HOSTILE}.weight", "model.norm.weight"])
    table = _cli("checkpoint", str(file))
    assert table.exit_code == 0, table.output
    _no_controls(table.output)
    assert "model.\\x1b]0;pwned\\x07\\x1b[2J" in table.stdout
    # JSON keeps the exact name (escaped by JSON itself); read back it is the hostile name
    data = json.loads(_cli("checkpoint", str(file), "--format", "json").stdout)
    assert f"model.{HOSTILE}.weight" in {r["name"] for r in data}


def test_sql_values_and_errors_are_escaped(store_of) -> None:
    db = store_of("Qwen3-0.6B")
    result = _cli("--db", str(db), "sql", "select chr(27) || '[2J' || chr(27) || ']0;t' || chr(7) as name")
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert "\\x1b[2J\\x1b]0;t\\x07" in result.stdout
    # a hostile name in an error message (an unknown saved query) is escaped too
    error = _cli("--db", str(db), "query", HOSTILE)
    assert error.exit_code == EXIT_USER_ERROR
    _no_controls(error.output)
    assert "known saved queries: " in " ".join(error.output.split())  # (was "querys")


def test_build_of_a_model_with_a_hostile_name(tmp_path: Path) -> None:
    spec = tmp_path / "evil.yaml"
    spec.write_text(f"model: {json.dumps(HOSTILE)}\nextends: Qwen3-0.6B\nhf_id: test/evil\n", encoding="utf-8")
    db = tmp_path / "store.duckdb"
    result = _cli("--db", str(db), "build", str(spec))
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert "\\x1b]0;pwned" in result.stdout
    # the store keeps the exact name: a query by it finds it
    assert api.query("select model from models", db=db).column("model").to_pylist() == [HOSTILE]
    listed = _cli("--db", str(db), "sql", "select model, params from model_summary")
    _no_controls(listed.output)


# ---------------------------------------------------------------------------- index paths


SECRET = b"SECRET!!"  # the first 8 bytes of a file outside the checkpoint: read as a header length,
LEAK = str(struct.unpack("<Q", SECRET)[0])  # they used to be printed as this integer


@pytest.mark.parametrize("outside", ["../outside.safetensors", "/ABSOLUTE", "sub/../../outside.safetensors"])
def test_index_shard_outside_the_folder_is_refused_unread(tmp_path: Path, outside: str) -> None:
    secret = tmp_path / "outside.safetensors"
    secret.write_bytes(SECRET + b"private data")
    if outside == "/ABSOLUTE":
        outside = str(secret)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    _safetensors(folder / "model-1.safetensors", ["a.weight"])
    index = {"weight_map": {"a.weight": "model-1.safetensors", "b.weight": outside}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(folder)
    text = str(info.value)
    assert "outside the checkpoint folder" in text and json.dumps(outside) in text
    assert LEAK not in text and "SECRET" not in text
    result = _cli("checkpoint", str(folder))
    assert result.exit_code == EXIT_USER_ERROR and "Traceback" not in result.output
    assert LEAK not in result.output and "outside the checkpoint folder" in result.stderr


def test_etc_passwd_in_the_index_is_refused(tmp_path: Path) -> None:
    _safetensors(tmp_path / "model-1.safetensors", ["a.weight"])
    index = {"weight_map": {"a.weight": "model-1.safetensors", "b.weight": "/etc/passwd"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    result = _cli("checkpoint", str(tmp_path))
    assert result.exit_code == EXIT_USER_ERROR
    assert '"/etc/passwd"' in result.stderr and "header" not in result.stderr


def test_shards_in_a_subfolder_of_the_checkpoint_still_read(tmp_path: Path) -> None:
    (tmp_path / "shards").mkdir()
    _safetensors(tmp_path / "shards" / "model-1.safetensors", ["a.weight", "b.weight"])
    index = {"weight_map": {"a.weight": "shards/model-1.safetensors", "b.weight": "shards/model-1.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    table = read_checkpoint(tmp_path)
    assert sorted(table.column("name").to_pylist()) == ["a.weight", "b.weight"]


# ---------------------------------------------------------------------------- saved query names


def test_saved_query_is_a_name_not_a_path(store_of, tmp_path: Path) -> None:
    db = store_of("Qwen3-0.6B")
    evil = tmp_path / "evil.sql"
    evil.write_text("select 'ran the file' as evil\n", encoding="utf-8")
    relative = os.path.relpath(evil.with_suffix(""), QUERIES_DIR)  # ../../…/evil from archsql/queries
    assert (QUERIES_DIR / f"{relative}.sql").is_file()  # the path the old code opened
    for name in (relative, str(evil.with_suffix("")), str(evil)):
        result = _cli("--db", str(db), "query", name)
        assert result.exit_code == EXIT_USER_ERROR, result.output
        assert "ran the file" not in result.output
        assert "a saved query is a name, not a path" in result.stderr
    typo = _cli("--db", str(db), "query", "sumary")
    assert typo.exit_code == EXIT_USER_ERROR and "did you mean 'summary'?" in typo.stderr
    assert "summary" in saved()
