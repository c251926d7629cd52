"""Weak errors made clear (issue 19, class 7: "weak errors").  Each input is built here; each
test shows the message the user now gets and, where it matters, that nothing else changed.

- ``extends:`` naming the model itself said "no file next to this one" (a file whose name is
  not the model's) or "cycle: X → X"; now "extends itself", and a longer cycle shows its chain.
- ``hidden_size: true`` in a config bound the width as 1; a bool now binds only a flag dim.
- A tensor named twice in a safetensors header (or a GGUF metadata key given twice) collapsed
  silently to the last one; now a located error naming it.
- An ``architectures`` value no catalog config names was never looked at; ``validate`` now
  warns, naming it, the closest known class and the known ones (the verdict is unchanged).
- GGUF ``general.alignment`` 2^31 reported tensors ending "beyond" a negative size; the
  alignment is checked (a power of two, ggml's rule) and the data section must start inside
  the file.
- Two builds of one store: the second evaluated every model before failing on the lock; now
  it is refused at once.  A query during a build's write window failed; now it waits (bounded,
  ``ARCHSQL_LOCK_WAIT_S``) and, past the bound, says who holds the store.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import EXIT_OK, EXIT_USER_ERROR, CheckpointError, ConfigError, SpecError, StoreError
from archsql.evaluator import evaluate
from archsql.ingest.checkpoint import read_checkpoint
from archsql.ingest.hf_config import read_config
from archsql.schema.expr import FlagValue, eval_binding
from archsql.schema.spec import parse_model
from archsql.specs import default_library
from archsql.store import build_lock, write_store

CONFIGS = default_library().configs_dir
LLAMA = "Meta-Llama-3.1-8B"  # binds d_model: config.hidden_size
LLAMA_CONFIG = CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"


def _llama_config(**changes) -> dict:
    return {**json.loads(LLAMA_CONFIG.read_text(encoding="utf-8")), **changes}


def _model(tmp_path: Path, config: dict, *, dims: str = "", name: str = "weak") -> Path:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"model: {name}\nextends: {LLAMA}\nhf_id: test/{name}\nconfig: {config_file}\n" + dims, encoding="utf-8"
    )
    return path


def _issues(path: Path) -> list[str]:
    _, col = parse_model(path)
    return [i.render() for i in col.issues]


# ---------------------------------------------------------------------------- extends


def test_a_model_extending_itself_says_so(tmp_path):
    same = tmp_path / "selfish.yaml"
    same.write_text("model: selfish\nextends: selfish\nhf_id: a/b\n", encoding="utf-8")
    other_name = tmp_path / "file-name.yaml"  # the file is not named after the model
    other_name.write_text("model: mine\nextends: mine\nhf_id: a/b\n", encoding="utf-8")
    assert _issues(same)[0].startswith(f"{same}:2:10 $.extends: model 'selfish' extends itself")
    (issue,) = _issues(other_name)
    assert "model 'mine' extends itself" in issue
    assert "no file" not in issue  # the old, misleading message


def test_a_longer_extends_cycle_shows_its_chain(tmp_path):
    for name, parent in (("a", "b"), ("b", "c"), ("c", "a")):
        (tmp_path / f"{name}.yaml").write_text(f"model: {name}\nextends: {parent}\nhf_id: x/{name}\n", encoding="utf-8")
    (issue,) = _issues(tmp_path / "a.yaml")
    assert "extends chain forms a cycle: a → b → c → a" in issue  # was "a → b → a"


# ---------------------------------------------------------------------------- bool dims


def test_a_boolean_config_value_is_not_an_integer_dim(tmp_path):
    path = _model(tmp_path, _llama_config(hidden_size=True))
    with pytest.raises(SpecError) as err:
        evaluate(path)
    (issue,) = [i for i in err.value.issues if "boolean" in i.message]
    assert issue.message.startswith("dim 'd_model' binds to a boolean (config.hidden_size is true): a bool is not")
    assert issue.file and issue.file.endswith(f"{LLAMA}.yaml") and issue.line is not None  # the binding's line
    assert (issue.expected, issue.got) == ("an integer", "true")


def test_a_boolean_literal_in_the_spec_is_not_an_integer_dim(tmp_path):
    path = _model(tmp_path, _llama_config(), dims="dims:\n  d_model: true\n")
    with pytest.raises(SpecError) as err:
        evaluate(path)
    (issue,) = [i for i in err.value.issues if "boolean" in i.message]
    assert (issue.file, issue.line, issue.path) == (str(path), 6, "$.dims.d_model")


def test_a_boolean_still_binds_a_flag_and_arithmetic_on_it():
    value = eval_binding("config.tie_word_embeddings", {"tie_word_embeddings": True})
    assert isinstance(value, FlagValue) and value == 1
    product = eval_binding("config.flag * 4", {"flag": True})
    assert product == 4 and not isinstance(product, FlagValue)


# ---------------------------------------------------------------------------- duplicate names


def _safetensors(path: Path, header: bytes, data_size: int) -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * data_size)
    return path


def test_a_tensor_named_twice_in_a_safetensors_header(tmp_path):
    entry = '{"dtype": "F32", "shape": [2], "data_offsets": [%d, %d]}'
    header = ('{"w": ' + entry % (0, 8) + ', "w": ' + entry % (8, 16) + "}").encode()
    path = _safetensors(tmp_path / "twice.safetensors", header, 16)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert "twice.safetensors: header names 'w' twice" in str(err.value)
    unique = ('{"w": ' + entry % (0, 8) + ', "v": ' + entry % (8, 16) + "}").encode()
    assert read_checkpoint(_safetensors(tmp_path / "ok.safetensors", unique, 16)).num_rows == 2


def test_a_config_key_given_twice_with_different_values(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 4096, "hidden_size": 8192}', encoding="utf-8")
    with pytest.raises(ConfigError, match="config key 'hidden_size' is given twice with different values"):
        read_config(config)
    config.write_text('{"hidden_size": 4096, "hidden_size": 4096}', encoding="utf-8")  # harmless repeat
    assert read_config(config) == {"hidden_size": 4096}


def _gguf(path: Path, metadata: list[tuple[bytes, int]], tensors: list[tuple[bytes, int]]) -> Path:
    """A GGUF v3 file: u32 metadata values (type 4), 1-D F32 tensors (ggml type 0) of n elements."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, value)
    offset = 0
    for name, n in tensors:
        out += struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, n, 0, offset)
        offset += -(-4 * n // 32) * 32
    align = dict(metadata).get(b"general.alignment", 32)
    out += b"\0" * (-len(out) % align if align < 1 << 16 else 0)
    path.write_bytes(out + b"\0" * offset)
    return path


def test_gguf_names_given_twice(tmp_path):
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(_gguf(tmp_path / "t.gguf", [], [(b"w", 8), (b"w", 8)]))
    assert "tensor 'w' appears twice" in str(err.value)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(_gguf(tmp_path / "m.gguf", [(b"general.alignment", 32), (b"general.alignment", 64)], []))
    assert "metadata key 'general.alignment' appears twice" in str(err.value)


# ---------------------------------------------------------------------------- GGUF alignment


def test_gguf_alignment_beyond_the_file_is_a_clear_error(tmp_path):
    path = _gguf(tmp_path / "a.gguf", [(b"general.alignment", 2**31)], [(b"w", 8)])
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    message = str(err.value)
    size = path.stat().st_size
    assert (
        f"general.alignment 2,147,483,648 puts the tensor data at byte 2,147,483,648, beyond the end of the file ({size:,} bytes)"
        in message
    )
    assert "-2," not in message  # no negative size (was "end <= -2,147,483,…")
    with pytest.raises(CheckpointError, match=r"general\.alignment must be a power of two"):
        read_checkpoint(_gguf(tmp_path / "b.gguf", [(b"general.alignment", 48)], [(b"w", 8)]))
    assert read_checkpoint(_gguf(tmp_path / "ok.gguf", [(b"general.alignment", 64)], [(b"w", 8)])).num_rows == 1


# ---------------------------------------------------------------------------- architectures


def test_validate_warns_about_an_unknown_architecture(tmp_path):
    path = _model(tmp_path, _llama_config(architectures=["LlamaForCausalLm"]))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == EXIT_OK, result.output  # a warning: the spec is still publishable
    assert "warning:" in result.output
    flat = " ".join(result.output.split())  # messages wrap at the terminal's width
    assert "unknown architecture 'LlamaForCausalLm': no catalog model's config names it" in flat
    assert "did you mean 'LlamaForCausalLM'?" in flat and "known: " in flat
    (tmp_path / "k").mkdir()
    known = _model(tmp_path / "k", _llama_config(), name="known")  # LlamaForCausalLM, as in the catalog
    assert "warning:" not in CliRunner().invoke(cli, ["validate", str(known)]).output


# ---------------------------------------------------------------------------- the store's lock


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("empty") / "store.duckdb"
    write_store(db, {})  # parameter tables and views, no model
    return db


@pytest.fixture
def store(empty_store, tmp_path) -> Path:
    """A private copy of the empty store (each test locks or builds into its own)."""
    db = tmp_path / "store.duckdb"
    shutil.copy(empty_store, db)
    return db


def test_a_second_build_is_refused_before_it_evaluates(store, monkeypatch):
    evaluated = []
    monkeypatch.setattr(api, "evaluate_all", lambda *a, **k: evaluated.append(a) or ({}, {}))
    with build_lock(store):  # the first build, still evaluating
        t0 = time.perf_counter()
        with pytest.raises(
            StoreError, match=f"another archsql build is writing to the store {store} \\(pid {os.getpid()}"
        ):
            api.build([LLAMA], db=store)
        result = CliRunner().invoke(cli, ["--db", str(store), "build", LLAMA])
        assert time.perf_counter() - t0 < 5
    assert evaluated == []  # nothing evaluated
    assert result.exit_code == EXIT_USER_ERROR and "another archsql build" in result.output, result.output


_HOLD = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(float(sys.argv[2]))"


def _hold(db: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the store's write lock for ``seconds`` (a build's write window)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(db), str(seconds)], stdout=subprocess.PIPE)
    with proc.stdout:
        assert proc.stdout.readline().strip() == b"held"
    return proc


def test_a_query_during_a_write_waits_for_it(store):
    proc = _hold(store, 1.5)
    try:
        t0 = time.perf_counter()
        assert api.query("select count(*) as n from deployments", db=store).num_rows == 1
        waited = time.perf_counter() - t0
    finally:
        proc.wait()
    assert waited > 0.5  # it waited for the writer instead of failing


def test_a_query_past_the_wait_bound_names_the_holder(store, monkeypatch):
    monkeypatch.setenv("ARCHSQL_LOCK_WAIT_S", "0.5")
    proc = _hold(store, 20)
    try:
        t0 = time.perf_counter()
        with pytest.raises(StoreError) as err:
            api.query("select 1", db=store)
        assert time.perf_counter() - t0 < 5
        result = CliRunner().invoke(cli, ["--db", str(store), "sql", "select 1"])
    finally:
        proc.kill()
        proc.wait()
    assert f"the store {store} is locked: process {proc.pid} is writing to it" in str(err.value)
    assert "ARCHSQL_LOCK_WAIT_S" in str(err.value)
    assert result.exit_code == EXIT_USER_ERROR and "is locked" in result.output, result.output
