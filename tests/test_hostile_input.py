"""Hostile and careless input (issue 19): each defect of classes 4 and 5 rebuilt from its input,
and the exit-code contract every command keeps.

- **Class 4, hangs from small files**: an exponent tower in a dim expression, a YAML alias bomb,
  millions of unknown keys, a million (or 10^12) layers, JSON nested thousands deep.  Each now
  ends in a located error within a second or two (``_quick`` bounds the wall time).
- **Class 5, tracebacks instead of errors**: ``RecursionError`` (nested JSON, nested GGUF arrays),
  ``OverflowError`` (a zero-element tensor with a dim >= 2^63), ``UnicodeDecodeError`` (a config
  that is not UTF-8), ``ZeroDivisionError`` (0 heads, ``sweep --tp 0``), ``MemoryError``.  Each is
  now archsql's own error type naming the file (and line, where there is one) and what to do.
- **Exit codes** (archsql.errors.EXIT_*): 0 ok, 1 a verdict (audit "reject"), 2 a user error,
  3 an internal error with a short message and a log file; never a traceback on the terminal.

Every input is built here, from the catalog's own configs where a model is needed.
"""

from __future__ import annotations

import itertools
import json
import struct
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.errors import (
    EXIT_INTERNAL_ERROR,
    EXIT_USER_ERROR,
    EXIT_VERDICT,
    MAX_SHOWN_ISSUES,
    CheckpointError,
    ConfigError,
    SpecError,
)
from archsql.evaluator import evaluate
from archsql.ingest.checkpoint import read_checkpoint
from archsql.ingest.gguf_headers import SkippedArray, read_gguf_header
from archsql.ingest.hf_config import read_config
from archsql.schema.expr import MAX_INT_BITS, ExprSyntaxError, eval_binding, parse_dim_expr
from archsql.schema.spec import parse_model
from archsql.schema.yamlsrc import MAX_YAML_BYTES, MAX_YAML_VALUES, load_yaml, load_yaml_text
from archsql.specs import default_library

CONFIGS = default_library().configs_dir
# Meta-Llama-3.1-8B binds d_head: "config.head_dim or config.hidden_size // config.num_attention_heads"
# and its config has no head_dim, so 0 heads reached the floor division.
LLAMA = "Meta-Llama-3.1-8B"
LLAMA_CONFIG = CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"


@contextmanager
def _quick(seconds: float = 5.0):
    """The block must end within ``seconds`` (before the fixes these inputs ran for minutes)."""
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    assert elapsed < seconds, f"took {elapsed:.1f} s"


def _model(tmp_path: Path, config: dict, *, dims: str = "") -> Path:
    """A derived model of Meta-Llama-3.1-8B reading ``config`` (written next to it)."""
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    path = tmp_path / "hostile.yaml"
    path.write_text(
        f"model: hostile\nextends: {LLAMA}\nhf_id: test/hostile\nconfig: {config_file}\n" + dims, encoding="utf-8"
    )
    return path


def _llama_config(**changes) -> dict:
    return {**json.loads(LLAMA_CONFIG.read_text(encoding="utf-8")), **changes}


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def _assert_exit(result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    flat = " ".join(result.output.split())  # messages wrap at the terminal's width
    for fragment in fragments:
        assert fragment in flat, result.output


# ---------------------------------------------------------------------------- class 4: hangs


def test_exponent_tower_in_a_dim_expression_is_refused_at_once(tmp_path):
    """Class 4: ``10 ** 10 ** 10`` (a number of ten billion digits) never returned."""
    with _quick(), pytest.raises(ExprSyntaxError, match=r"exponent 10000000000 .* out of range"):
        eval_binding("10 ** 10 ** 10", {})
    with _quick(), pytest.raises(ExprSyntaxError, match="exponent in '10 \\*\\* 10 \\*\\* 10' must be an integer"):
        parse_dim_expr("10 ** 10 ** 10", {})
    # a small power still evaluates: 2**10 = 1024; numbers stay below 2**128 (at most 128 bits)
    assert eval_binding("2 ** 10", {}) == 1024 and parse_dim_expr("2 ** 10", {}) == 1024
    assert eval_binding(f"2 ** {MAX_INT_BITS - 1}", {}) == 2 ** (MAX_INT_BITS - 1)
    with pytest.raises(ExprSyntaxError, match="a 129-bit number, above 2\\*\\*128"):
        eval_binding(f"2 ** {MAX_INT_BITS - 1} * 2", {})
    # through a model file: the error names the file, the line and the dim
    path = _model(tmp_path, _llama_config(), dims="dims:\n  n_layers: '10 ** 10 ** 10'\n")
    with _quick(), pytest.raises(SpecError) as err:
        evaluate(path)
    assert f"{path}:6:3 $.dims.n_layers" in str(err.value) and "out of range" in str(err.value)


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """Anchors a, b, c, …: each lists the previous one ``width`` times, so the last expands to
    width**levels values."""
    names = "abcdefghijklmnop"[:levels]
    lines = ["a: &a [x" + ",x" * (width - 1) + "]"]
    lines += [f"{b}: &{b} [*{a}" + f",*{a}" * (width - 1) + "]" for a, b in itertools.pairwise(names)]
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_is_refused_with_the_file_named(tmp_path):
    """Class 4: a few hundred bytes of nested aliases expand to 9**9 = 387,420,489 values (the
    391-byte file of the issue cost ~100 s); the expansion is counted before anything is built."""
    text = _alias_bomb()
    assert len(text) < 400
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    with _quick(), pytest.raises(SpecError) as err:
        load_yaml(path)
    message = str(err.value)
    assert str(path) in message and f"expands to more than {MAX_YAML_VALUES:,} values" in message
    assert "aliases" in message
    # the same aliases a few levels shallower (9**3 = 729 leaves) still load, shared
    data = load_yaml_text(_alias_bomb(levels=3), "small.yaml")
    assert len(data["c"]) == 9 and len(data["c"][0]) == 9 and data["c"][0][0] == ["x"] * 9


def test_two_million_unknown_keys_are_refused_by_size(tmp_path):
    """Class 4: 2,000,000 unknown keys took over 300 s (a did-you-mean search per key); a spec
    file is bounded in size before it is parsed."""
    text = "model: m\n" + "".join(f"k{i}: 1\n" for i in range(2_000_000))
    path = tmp_path / "keys.yaml"
    path.write_text(text, encoding="utf-8")
    with _quick(), pytest.raises(SpecError) as err:
        load_yaml(path)
    assert str(path) in str(err.value) and f"larger than the bound of {MAX_YAML_BYTES:,} bytes" in str(err.value)


def test_many_unknown_keys_stop_with_a_summary(tmp_path):
    """Class 4: errors are counted, not all rendered: 5,000 unknown keys, the 6 missing required
    keys (model, config, dims, templates, graph, outputs) and the 2 of them that must be strings
    (model, config: "wrong type") are 5,008 issues, of which the message shows
    MAX_SHOWN_ISSUES = 50 and counts 5,008 - 50 = 4,958 more."""
    path = tmp_path / "keys.yaml"
    path.write_text("".join(f"k{i}: 1\n" for i in range(5_000)), encoding="utf-8")
    with _quick():
        _, col = parse_model(path)
        error = SpecError(issues=col.issues)
    assert len(col.issues) == 5_008
    message = str(error)
    assert message.count("unknown key") == MAX_SHOWN_ISSUES and message.endswith("… and 4,958 more")
    assert "did you mean" not in message.split("\n")[-1]
    result = _cli("build", str(path))
    _assert_exit(result, EXIT_USER_ERROR, "… and 4,958 more")


@pytest.mark.parametrize("layers", [1_000_000, 10**12])
def test_layer_count_has_a_physical_bound(tmp_path, layers):
    """Class 4: n_layers 1,000,000 built for 169 s at 3.3 GB; 10^12 raised MemoryError.  The
    stack's repeat is bounded (10,000) before any layer is expanded."""
    path = _model(tmp_path, _llama_config(num_hidden_layers=layers))
    with _quick(), pytest.raises(SpecError) as err:
        evaluate(path)
    message = str(err.value)
    assert f"repeat of stack 'decoder' is {layers:,} layers, above the bound of 10,000" in message
    assert f"n_layers = {layers:,}" in message and "Meta-Llama-3.1-8B.yaml:24:5 $.stacks.decoder.repeat" in message


# ---------------------------------------------------------------------------- class 5: tracebacks


def _safetensors(path: Path, header: bytes, data_size: int = 0) -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * data_size)
    return path


def test_deeply_nested_json_is_a_located_error(tmp_path):
    """Classes 4 and 5: JSON nested 100,000 deep raised RecursionError from the safetensors
    header, the shard index and config.json; nesting is bounded (64 levels)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    header = _safetensors(tmp_path / "deep.safetensors", b'{"a": ' + deep + b"}")
    with _quick(), pytest.raises(CheckpointError, match=r"deep\.safetensors: header: JSON nested too deeply"):
        read_checkpoint(header)
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(b'{"weight_map": ' + deep + b"}")
    with pytest.raises(CheckpointError, match=r"model\.safetensors\.index\.json: index: JSON nested too deeply"):
        read_checkpoint(index)
    config = tmp_path / "config.json"
    config.write_bytes(b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}")  # parses, but deeper than 64 levels
    with pytest.raises(ConfigError, match=r"config\.json: config: JSON nested more than 64 levels"):
        read_config(config)


def _gguf_nested(path: Path, depth: int) -> Path:
    value = struct.pack("<IQ", 4, 0)  # an empty array of u32
    for _ in range(depth):
        value = struct.pack("<IQ", 9, 1) + value  # an array of one array
    key = b"nested"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + value
    path.write_bytes(header + b"\0" * (-len(header) % 32))
    return path


def test_nested_gguf_arrays_are_a_located_error(tmp_path):
    """Class 5: arrays of arrays 5,000 deep (12 bytes a level) raised RecursionError."""
    path = _gguf_nested(tmp_path / "deep.gguf", 5_000)
    with _quick(), pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert "deep.gguf: arrays nested more than 8 levels deep" in str(err.value)
    assert "reading metadata value 'nested'" in str(err.value)
    assert read_checkpoint(_gguf_nested(tmp_path / "ok.gguf", 3)).num_rows == 0  # shallow nesting reads


def test_huge_honest_gguf_arrays_are_stepped_over(tmp_path):
    """Class 4: a valid file whose metadata holds arrays longer than MAX_KEPT_ARRAY (2^20): 3M
    u8 (3 MB) and 1.1M one-byte strings (9 bytes each: u64 length + byte) were built into Python
    lists (tens of bytes per element); now each is stepped over and kept as its type and length,
    while a short array is still read whole."""

    def kv(key: bytes, vtype: int, payload: bytes) -> bytes:
        return struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + payload

    u8s, strings = 3_000_000, 1_100_000
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 3)
    header += kv(b"big.u8", 9, struct.pack("<IQ", 0, u8s) + b"\1" * u8s)
    header += kv(b"tokens", 9, struct.pack("<IQ", 8, strings) + (struct.pack("<Q", 1) + b"a") * strings)
    header += kv(b"small", 9, struct.pack("<IQ", 4, 3) + struct.pack("<3I", 1, 2, 3))
    path = tmp_path / "big.gguf"
    path.write_bytes(header + b"\0" * (-len(header) % 32))
    metadata = read_gguf_header(path).metadata
    assert metadata == {
        "big.u8": SkippedArray(element_type=0, count=u8s),
        "tokens": SkippedArray(element_type=8, count=strings),
        "small": [1, 2, 3],
    }
    assert read_checkpoint(path).num_rows == 0  # no tensors, no error
    # a length beyond the file is still a located truncation, not a skip past the end
    lying = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv(b"big.u8", 9, struct.pack("<IQ", 0, 2**40))
    (tmp_path / "lying.gguf").write_bytes(lying + b"\0" * (-len(lying) % 32))
    with pytest.raises(CheckpointError, match=r"metadata value 'big\.u8'"):
        read_checkpoint(tmp_path / "lying.gguf")


def test_zero_element_tensor_with_a_huge_dim(tmp_path):
    """Class 5: shape [0, 2^63] holds no element (valid in both formats) but 2^63 does not fit
    the store's int64: OverflowError, now a CheckpointError naming the tensor."""
    header = json.dumps({"empty": {"dtype": "F32", "shape": [0, 2**63], "data_offsets": [0, 0]}}).encode()
    path = _safetensors(tmp_path / "huge.safetensors", header)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert "tensor 'empty': shape must be a list of integers from 0 to 2**63 - 1" in str(err.value)
    name = b"empty"
    gguf = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", len(name)) + name
    gguf += struct.pack("<I2QIQ", 2, 0, 2**63, 0, 0)  # dims [0, 2^63] of F32 at offset 0
    (tmp_path / "huge.gguf").write_bytes(gguf + b"\0" * (-len(gguf) % 32))
    with pytest.raises(CheckpointError, match="tensor 'empty': a dim of 9,223,372,036,854,775,808 is beyond"):
        read_checkpoint(tmp_path / "huge.gguf")


def test_config_that_is_not_utf8(tmp_path):
    """Class 5: a Latin-1 config.json raised UnicodeDecodeError; now the file, line and column
    of the first bad byte.  '{', the newline, two spaces, '"name"', ':', a space, '"' and 'caf'
    are 1 + 1 + 2 + 6 + 1 + 1 + 1 + 3 = 16 bytes, so 0xe9 is at offset 16; line 2 starts at
    offset 2, so its column is 16 - 2 + 1 = 15."""
    config = tmp_path / "config.json"
    config.write_bytes('{\n  "name": "café"}'.encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        read_config(config)
    assert f"{config}:2:15: config is not UTF-8 text: byte 0xe9 at offset 16" in str(err.value)
    spec = tmp_path / "latin.yaml"
    spec.write_bytes("model: café\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"latin\.yaml: spec file is not UTF-8 text: byte 0xe9 at offset 10"):
        load_yaml(spec)
    path = _model(tmp_path, {})
    path.with_name("config.json").write_bytes(b'{"hidden_size": "\xff"}')
    _assert_exit(_cli("explain", str(path)), EXIT_USER_ERROR, "config is not UTF-8 text")


def test_zero_heads_is_a_located_division_by_zero(tmp_path):
    """Class 5: num_attention_heads 0 with no head_dim: d_head = hidden_size // n_heads raised
    ZeroDivisionError; now both dims are reported at their lines in the spec."""
    path = _model(tmp_path, _llama_config(num_attention_heads=0))
    with pytest.raises(SpecError) as err:
        evaluate(path)
    message = str(err.value)
    assert "$.dims.d_head: 'config.hidden_size // config.num_attention_heads' divides by zero" in message
    assert "(config.num_attention_heads is 0)" in message and "dim 'n_heads' must be positive" in message


@pytest.mark.parametrize("option", ["--tp", "--batch", "--context", "--count"])
def test_sweep_sizes_below_one_are_user_errors(tmp_path, option):
    """Class 5: ``sweep --tp 0`` divided the GPU count by zero; every size and degree is >= 1."""
    result = _cli("--db", str(tmp_path / "none.duckdb"), "sweep", "Qwen3-0.6B", option, "0")
    _assert_exit(result, EXIT_USER_ERROR, "must be an integer >= 1, got 0")


# ---------------------------------------------------------------------------- the exit-code contract


def test_exit_code_contract_ok_and_user_error(tmp_path):
    """0 for an answer; 2 and one message (no traceback) for a hostile spec file."""
    _assert_exit(_cli("models"), 0, "Qwen3-0.6B")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb(), encoding="utf-8")
    _assert_exit(_cli("build", str(bomb)), EXIT_USER_ERROR, "error: ", "expands to more than")


def test_exit_code_contract_verdict(tmp_path):
    """1 for a verdict: an audit whose candidate does not evaluate is rejected (and says why)."""
    path = _model(tmp_path, _llama_config(), dims="dims:\n  n_layers: '10 ** 10 ** 10'\n")
    result = _cli("audit", LLAMA, str(path), "--store", str(tmp_path / "audit.duckdb"))
    _assert_exit(result, EXIT_VERDICT, "REJECT", "does not evaluate", "out of range")


@pytest.mark.parametrize(
    ("raised", "code", "fragment"),
    [
        (RuntimeError("a bug"), EXIT_INTERNAL_ERROR, "internal error: RuntimeError: a bug"),
        (MemoryError(), EXIT_INTERNAL_ERROR, "error: out of memory"),
        (FileNotFoundError(2, "No such file or directory", "/no/such/file"), EXIT_USER_ERROR, "/no/such/file"),
    ],
)
def test_exit_code_contract_internal_errors_go_to_a_log(tmp_path, monkeypatch, raised, code, fragment):
    """3 for a bug (or exhausted memory): one short line and the path of a log that holds the
    traceback; an unreadable path is the user's (2).  Nothing reaches the terminal as a traceback."""
    import archsql.api

    def broken():
        raise raised

    monkeypatch.setattr(archsql.api, "catalog", broken)
    monkeypatch.setenv("ARCHSQL_LOG_DIR", str(tmp_path / "logs"))
    result = _cli("models")
    _assert_exit(result, code, fragment)
    logs = list((tmp_path / "logs").glob("archsql-error-*.log")) if (tmp_path / "logs").exists() else []
    if code == EXIT_INTERNAL_ERROR:
        assert len(logs) == 1 and str(logs[0]) in result.output
        text = logs[0].read_text(encoding="utf-8")
        assert "Traceback" in text and type(raised).__name__ in text and "subcommand: models" in text
    else:
        assert not logs
