"""Property tests over the parsers that read what a user hands archsql (issue 19, classes 4
and 5: hangs from small files, tracebacks instead of errors).

The property, for every parser: any input either parses or raises archsql's own error type
(:class:`~archsql.errors.ArchsqlError`: a located message, never a traceback), and each case
finishes within a deadline (a bounded parser cannot hang on a short input).  The parsers:

- the expression parser (``archsql.schema.expr``): dim expressions and config bindings;
- the spec loader: YAML text (``load_yaml_text``), then the model and component schemas;
- the safetensors header reader (``archsql.ingest.safetensors_headers``): header bytes,
  tensor entries, shard indexes, and the ``checkpoint_tensors`` table built from them;
- the GGUF header reader (``archsql.ingest.gguf_headers``): raw bytes and hand-built files
  with nested arrays, huge counts and dims.

Strategies mix free text or bytes with the grammar's own tokens (operators, YAML anchors and
aliases, JSON brackets, GGUF type ids), so that the inputs reach past the first syntax check.
Examples are few and the deadline generous, so the file runs in seconds on two cores.
"""

from __future__ import annotations

import json
import struct
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from archsql.dtypes import DTYPE_BITS
from archsql.errors import ArchsqlError
from archsql.ingest.checkpoint import to_table
from archsql.ingest.gguf_headers import GGML_TYPES, _parse, _Reader
from archsql.ingest.safetensors_headers import decode_header, header_tensors, read_weight_map
from archsql.schema.expr import dim_symbols, eval_binding, parse_dim_expr, substitute_dims
from archsql.schema.spec import COMPONENT_KEYS, MODEL_KEYS, NODE_KEYS, STACK_KEYS, parse_component, parse_model
from archsql.schema.yamlsrc import load_yaml_text

# a case is bounded when it ends well inside this, even on a two-core machine loaded four times over
# (the hangs it guards against took 100 s and more)
FUZZ = settings(
    max_examples=120,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)


def _only_own_errors(call, *args, **kwargs):
    """Run ``call``: its result, or None when it raised an ArchsqlError (anything else fails)."""
    try:
        return call(*args, **kwargs)
    except ArchsqlError as exc:
        assert str(exc), "an error must carry a message"
        return None


# ---------------------------------------------------------------------------- expressions

_EXPR_TOKENS = st.sampled_from(
    [
        *("n_heads", "d_head", "n_layers", "B", "s", "c", "x", "config", "config.hidden_size", "config.layers"),
        *("config.sub.k", ".", "0", "1", "2", "10", "128", "1e999", "0.5", "-1", "99999999999999999999"),
        *("+", "-", "*", "/", "//", "%", "**", "(", ")", "[", "]", ",", " ", ":", "'s'", "True", "None"),
        *("min", "max", "ceil", "floor", "len", "int", "abs", "or", "and", "not", "if", "else", "==", "<"),
        *("lambda", "__import__", "[0]", "[-9]", "=", "\x00"),
    ]
)
_EXPR_TEXT = st.one_of(st.lists(_EXPR_TOKENS, max_size=25).map("".join), st.text(max_size=40))
_EXPR_VALUE = st.one_of(_EXPR_TEXT, st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers()))
_JSON_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=5)
)
_CONFIG = st.dictionaries(
    st.sampled_from(["hidden_size", "layers", "sub", "k", "x"]),
    st.recursive(
        _JSON_SCALAR,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["k", "x", "layers"]), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=5,
)
_SYMBOLS = dim_symbols({"n_heads": {}, "d_head": {}, "n_layers": {}})


@FUZZ
@given(_EXPR_VALUE, _CONFIG)
@example("10 ** 10 ** 10", {})  # class 4: never returned (an exponent of ten billion)
@example("2 ** 2 ** 2 ** 2 ** 2", {})
@example("config.hidden_size ** config.layers", {"hidden_size": 10, "layers": 10**10})
@example("config.hidden_size // config.layers", {"hidden_size": 4096, "layers": 0})  # class 5: ZeroDivisionError
@example("ceil(1e999)", {})  # OverflowError: float infinity to integer
@example("-" * 100_000 + "1", {})  # MemoryError / RecursionError inside Python's parser
@example("(" * 300 + "1" + ")" * 300, {})
def test_expressions_raise_only_own_errors(text, config):
    """Classes 4 and 5: a dim expression or binding parses, or raises ExprSyntaxError /
    MissingConfigKey (both ArchsqlErrors), within the deadline."""
    value = _only_own_errors(parse_dim_expr, text, _SYMBOLS)
    if value is not None:  # a value is finite: division by zero is an error, not sympy's zoo
        assert value.is_finite is not False
    _only_own_errors(eval_binding, text, config)
    substituted, _ = substitute_dims(text, {"n_heads": "d_head * 2"})  # never raises: unparsable stays as is
    _only_own_errors(parse_dim_expr, substituted, _SYMBOLS)


# ---------------------------------------------------------------------------- the spec loader

_YAML_TOKENS = st.sampled_from(
    [
        *("&a ", "*a", "&b ", "*b", "[", "]", "{", "}", ",", ": ", "- ", "\n", "  ", "? ", "<<: ", "#c", "|", ">"),
        *("model", "extends", "dims", "graph", "stacks", "repeat", "n_layers", "op", "in", "Qwen3-8B", "../x"),
        *("1", "-1", "1e999", "0x1F", ".inf", "~", "'q'", '"d"', "2024-13-45", "99999999999999999999"),
        *("!!str ", "!!set ", "!!binary ", "!!python/object:os.system ", "!custom ", "%YAML 1.1\n", "---\n", "..."),
        *("\t", "\x00", "\ufeff", "\x85", "\u2028"),
    ]
)
_YAML_KEYS = st.sampled_from(
    [*MODEL_KEYS, *COMPONENT_KEYS, *STACK_KEYS, *NODE_KEYS, "template", "layers", "carries", "from", "map", "decoder"]
)
_YAML_SCALAR = st.one_of(
    _JSON_SCALAR, st.sampled_from(["n_layers", "config.x", "a:b", "all", "each", "rest", "Qwen3-8B", "x/y", "[1]"])
)
_YAML_TREE = st.recursive(
    _YAML_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(_YAML_KEYS, _YAML_SCALAR), inner, max_size=5)
    ),
    max_leaves=25,
)


def _dumped(data) -> str:
    try:
        return yaml.safe_dump(data, default_flow_style=None)
    except (yaml.YAMLError, ValueError):
        return ""


_YAML_TEXT = st.one_of(
    st.lists(_YAML_TOKENS, max_size=40).map("".join),
    st.text(max_size=80),
    st.dictionaries(st.sampled_from(MODEL_KEYS), _YAML_TREE, max_size=8).map(_dumped),
)
_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)
)


@FUZZ
@given(_YAML_TEXT)
@example(_BOMB)  # class 4: 9**9 values from a few hundred bytes
@example("[" * 5000)  # class 5: RecursionError in the composer
@example("a: 2024-13-45\n")  # a timestamp PyYAML cannot build (ValueError)
@example("? [a, b]\n: 1\n")  # a list as a mapping key (TypeError: unhashable)
@example("extends: ../../etc/passwd\n")  # a path where a model name belongs (ValueError from pathlib)
def test_spec_loader_raises_only_own_errors(text):
    """Classes 4 and 5: YAML text loads, or raises a located SpecError; what loads passes
    the model and the component schema, or raises an ArchsqlError."""
    data = _only_own_errors(load_yaml_text, text, "fuzz.yaml")
    where = Path("/nonexistent-archsql-fuzz/fuzz.yaml")
    _only_own_errors(parse_model, where, data)
    _only_own_errors(parse_component, where, data)


# ---------------------------------------------------------------------------- safetensors headers

_SHAPE_DIM = st.one_of(
    st.integers(0, 6), st.integers(2**62, 2**66), st.integers(-3, -1), st.floats(), st.text(max_size=2)
)
_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "dtype": st.one_of(st.sampled_from(sorted(DTYPE_BITS)), st.text(max_size=3), st.integers()),
            "shape": st.one_of(st.lists(_SHAPE_DIM, max_size=3), _JSON_SCALAR),
            "data_offsets": st.one_of(st.lists(st.integers(-1, 2**66), max_size=3), _JSON_SCALAR),
        }
    ),
    _JSON_SCALAR,
    st.dictionaries(st.text(max_size=3), _JSON_SCALAR, max_size=3),
)
_TENSOR_NAME = st.one_of(st.sampled_from(["w", "__metadata__", "a.b", "\x1b[2J", "\ud800"]), st.text(max_size=6))
_HEADER_BYTES = st.one_of(
    st.binary(max_size=120),
    st.lists(
        st.sampled_from(['{"', '"', "[", "]", "{", "}", ":", ",", "1", "-", "e9", "\\ud800", "\\u0000"]), max_size=40
    )
    .map("".join)
    .map(str.encode),
    st.dictionaries(_TENSOR_NAME, _ENTRY, max_size=4).map(lambda h: json.dumps(h).encode()),
)


@FUZZ
@given(_HEADER_BYTES, st.one_of(st.none(), st.integers(0, 2**70)))
@example(b"[" * 100_000, 0)  # class 5: RecursionError in json
@example(json.dumps({"z": {"dtype": "F32", "shape": [0, 2**63], "data_offsets": [0, 0]}}).encode(), 0)  # OverflowError
@example(json.dumps({"\ud800": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode(), 4)  # lone surrogate
@example(b'{"w": ' + b"9" * 5000 + b"}", None)  # a number of more digits than int() takes
def test_safetensors_header_raises_only_own_errors(raw, data_size):
    """Class 5: header bytes decode, check and become checkpoint_tensors rows, or raise a
    CheckpointError naming the file."""
    header = _only_own_errors(decode_header, raw, "fuzz.safetensors")
    if header is None:
        return
    tensors = _only_own_errors(header_tensors, header, file="fuzz.safetensors", label="fuzz", data_size=data_size)
    if tensors is not None:
        table = to_table("fuzz", "safetensors", [tensors])
        assert table.num_rows == len(tensors.names)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(_HEADER_BYTES)
@example(b'{"weight_map": ' + b"[" * 50_000 + b"}")  # class 5: RecursionError in the index
@example(b'{"weight_map": {"w": "\xff\xfe"}}')  # not UTF-8
def test_shard_index_raises_only_own_errors(scratch, raw):
    """Class 5: a model.safetensors.index.json reads, or raises a CheckpointError."""
    path = scratch / "model.safetensors.index.json"
    path.write_bytes(raw)
    _only_own_errors(read_weight_map, path)


# ---------------------------------------------------------------------------- GGUF headers

_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


@st.composite
def _gguf_value(draw, vtype: int, depth: int = 0) -> bytes:
    if vtype == 8:
        raw = draw(st.binary(max_size=6))
        return struct.pack("<Q", draw(st.sampled_from([len(raw), len(raw), 2**63]))) + raw
    if vtype == 9:
        etype = draw(st.sampled_from([4, 8, 9, 9, 13]) if depth < 12 else st.just(4))
        n = draw(st.integers(0, 3))
        items = b"".join(draw(_gguf_value(etype, depth + 1)) for _ in range(n)) if etype != 13 else b""
        return struct.pack("<IQ", etype, draw(st.sampled_from([n, n, 2**64 - 1]))) + items
    if vtype in _FMT:
        return struct.pack("<" + _FMT[vtype], draw(st.integers(0, 1))) if vtype != 7 else b"\x01"
    return b""


@st.composite
def _gguf_file(draw) -> bytes:
    kvs = draw(st.lists(st.sampled_from([4, 6, 8, 9, 9, 10, 13]), max_size=4))
    body = bytearray()
    for vtype in kvs:
        key = draw(st.sampled_from([b"general.alignment", b"k", b"\xff"]))
        body += struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + draw(_gguf_value(vtype))
    n_tensors = draw(st.integers(0, 3))
    for _ in range(n_tensors):
        name = draw(st.sampled_from([b"w", b"w", b"\xff\xfe", b"\x1b[2J"]))
        dims = draw(st.lists(st.one_of(st.integers(0, 512), st.integers(2**63, 2**64 - 1)), max_size=5))
        gtype = draw(st.one_of(st.sampled_from(sorted(GGML_TYPES)), st.integers(0, 2**32 - 1)))
        offset = draw(st.one_of(st.integers(0, 64), st.integers(2**63, 2**64 - 1)))
        body += struct.pack("<Q", len(name)) + name + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, gtype, offset)
    counts = struct.pack(
        "<QQ",
        draw(st.sampled_from([n_tensors, n_tensors, 2**64 - 1])),
        draw(st.sampled_from([len(kvs), len(kvs), 2**64 - 1])),
    )
    version = draw(st.sampled_from([2, 3, 3, 1, 2**24]))
    tail = draw(st.binary(max_size=64))
    return b"GGUF" + struct.pack("<I", version) + counts + bytes(body) + tail


def _nested_gguf(depth: int) -> bytes:
    """A GGUF whose one metadata value is an array of arrays ``depth`` levels deep."""
    value = struct.pack("<IQ", 4, 0)
    for _ in range(depth):
        value = struct.pack("<IQ", 9, 1) + value
    key = b"nested"
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + value


@FUZZ
@given(st.one_of(_gguf_file(), st.binary(max_size=80).map(lambda b: b"GGUF\x03\x00\x00\x00" + b)))
@example(_nested_gguf(5000))  # class 5: RecursionError from nested arrays
def test_gguf_header_raises_only_own_errors(raw):
    """Class 5: a GGUF header parses into checkpoint_tensors rows, or raises a CheckpointError."""
    header = _only_own_errors(_parse, _Reader(raw), "fuzz.gguf", "fuzz.gguf")
    if header is not None:
        table = to_table("fuzz", "gguf", [header.tensors])
        assert table.num_rows == len(header.tensors.names)
