"""Header ingestion: safetensors files, shard sets, the HF cache, the Hub (a loopback server), GGUF.

Oracles: the ``safetensors`` library (files it writes, and files it rejects), huggingface_hub's own header
parser, the real MiniLM header and the real GGUF tensor inventory in ``fixtures/tensors`` (see SOURCES.md).
No test reaches the internet: name resolution is refused for every host but the loopback.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import constants

from archsql.dtypes import DTYPE_BITS
from archsql.errors import ArchsqlError
from archsql.ingest.checkpoint import read_checkpoint
from archsql.ingest.gguf_headers import GGML_TYPES, ggml_nbytes, read_gguf_header
from archsql.ingest.safetensors_headers import CheckpointError

TENSORS = Path(__file__).parent / "fixtures" / "tensors"
MINILM = TENSORS / "sentence-transformers__all-MiniLM-L6-v2.safetensors_header.json"
MINILM_CSV = TENSORS / "sentence-transformers__all-MiniLM-L6-v2.safetensors_header.csv"
GGUF_REAL = TENSORS / "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B.Q4_K_M.gguf_tensors.json"
SHA = "0123456789abcdef0123456789abcdef01234567"
GGML_ID = {name: i for i, (name, _, _) in GGML_TYPES.items()}


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    """Only the loopback can be resolved: a stray request to any other host fails the test."""
    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"test refused a connection to {host!r}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


# --------------------------------------------------------------------------- writers


def raw_file(path: Path, header: bytes, data_size: int = 0) -> Path:
    """8-byte length + header bytes + a sparse data section of ``data_size`` bytes."""
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + data_size)
    return path


def write_header(path: Path, header: dict, data_size: int | None = None) -> Path:
    """A safetensors file whose data section ends where the last tensor ends (or ``data_size``)."""
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    if data_size is None:
        data_size = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    return raw_file(path, raw, data_size)


def packed(tensors: dict[str, tuple[str, list[int]]]) -> dict:
    """A valid header: tensors back to back in the given order."""
    header, pos = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + size]}
        pos += size
    return header


def write_tensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    return write_header(path, packed(tensors))


def rows(table) -> list[tuple]:
    cols = ("file", "name", "dtype", "shape", "offset_begin", "offset_end")
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True), key=lambda r: (r[0], r[1]))


# --------------------------------------------------------------------------- local safetensors files


def test_file_written_by_the_safetensors_library(tmp_path):
    np = pytest.importorskip("numpy")
    from huggingface_hub import get_local_safetensors_metadata
    from safetensors.numpy import save_file

    arrays = {
        "emb.weight": np.zeros((10, 4), np.float32),
        "norm.weight": np.zeros(4, np.float16),
        "ids": np.zeros((1, 7), np.int64),
        "mask": np.zeros(3, np.bool_),
        "scalar": np.zeros((), np.float64),
        "qweight": np.zeros((2, 8), np.uint8),
    }
    path = tmp_path / "model.safetensors"
    save_file(arrays, path, metadata={"format": "np"})
    table = read_checkpoint(path)
    assert table.column("checkpoint").unique().to_pylist() == [str(path)]
    assert set(table.column("format").to_pylist()) == {"safetensors"}
    theirs = get_local_safetensors_metadata(path).files_metadata["model.safetensors"].tensors
    assert rows(table) == sorted(
        ("model.safetensors", n, t.dtype, list(t.shape), *t.data_offsets) for n, t in theirs.items()
    )
    got = {r[1]: (r[2], r[3]) for r in rows(table)}
    assert got["mask"] == ("BOOL", [3]) and got["scalar"] == ("F64", []) and got["ids"] == ("I64", [1, 7])


def test_real_minilm_header(tmp_path):
    """The real all-MiniLM-L6-v2 header, as a sparse file: every tensor back, and the offsets cover
    exactly the real file's data section (file size - 8 - header length, from SOURCES.md)."""
    fixture = json.loads(MINILM.read_text())
    header = {"__metadata__": fixture["__metadata__"]}
    header |= {t["name"]: {k: t[k] for k in ("dtype", "shape", "data_offsets")} for t in fixture["tensors"]}
    table = read_checkpoint(write_header(tmp_path / "model.safetensors", header))
    assert table.num_rows == fixture["tensor_count"] == 104
    nbytes = [e - b for b, e in zip(table["offset_begin"].to_pylist(), table["offset_end"].to_pylist(), strict=True)]
    assert sum(nbytes) == fixture["file_size_bytes"] - 8 - fixture["header_json_bytes"]
    with MINILM_CSV.open() as f:
        expected = {
            r["name"]: (r["dtype"], [int(d) for d in r["shape"].split("x")], int(r["nbytes"]))
            for r in csv.DictReader(f)
        }
    columns = (table["dtype"].to_pylist(), table["shape"].to_pylist(), nbytes)
    got = dict(zip(table["name"].to_pylist(), zip(*columns, strict=True), strict=True))
    assert got == {k: tuple(v) for k, v in expected.items()}
    assert {d for d, *_ in got.values()} == {"F32", "I64"}
    assert got["embeddings.word_embeddings.weight"][1] == [30522, 384]


SUB_BYTE = {"blocks": ("F4", [4, 6]), "f6": ("F6_E2M3", [8]), "scales": ("F8_E8M0", [4]), "w": ("F8_E4M3", [2, 2])}


def test_sub_byte_and_fp8_dtypes(tmp_path):
    table = read_checkpoint(write_tensors(tmp_path / "a.safetensors", SUB_BYTE))
    assert {r[1]: r[5] - r[4] for r in rows(table)} == {"blocks": 12, "f6": 6, "scales": 4, "w": 4}


def test_safetensors_library_accepts_the_sub_byte_file(tmp_path):
    pytest.importorskip("numpy")  # safe_open needs its framework
    from safetensors import safe_open

    with safe_open(write_tensors(tmp_path / "a.safetensors", SUB_BYTE), "np") as f:
        assert sorted(f.keys()) == sorted(SUB_BYTE)


# --------------------------------------------------------------------------- corrupt headers

GOOD = {
    "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
    "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},
}


def _with(**changes) -> dict:
    header = json.loads(json.dumps(GOOD))
    for name, entry in changes.items():
        header[name] = entry if entry is None else header.get(name, {}) | entry
    return {k: v for k, v in header.items() if v is not None}


CORRUPT = {
    # name: (writer(path), phrase in the message)
    "truncated": (lambda p: p.write_bytes(b"\x10\x00\x00"), "shorter than the 8-byte header length"),
    "header_past_end": (
        lambda p: p.write_bytes(struct.pack("<Q", 4096) + b'{"a": 1}'),
        "header length runs past the end of the file",
    ),
    "header_absurd": (
        lambda p: p.write_bytes(struct.pack("<Q", 2**40) + b"{}" * 8),
        "larger than the safetensors limit",
    ),
    "invalid_json": (
        lambda p: raw_file(p, b'{"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]', 16),
        "not valid JSON",
    ),
    "not_an_object": (lambda p: raw_file(p, b"[1, 2, 3]"), "must be a JSON object"),
    "non_utf8_name": (
        lambda p: raw_file(p, b'{"lay\xffer.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', 4),
        "not valid UTF-8",
    ),
    "unknown_dtype": (lambda p: write_header(p, _with(b={"dtype": "BF61"})), "unknown dtype 'BF61'"),
    "missing_field": (
        lambda p: write_header(p, {"a": {"dtype": "F32", "shape": [2, 2]}}, 16),
        "must have dtype, shape and data_offsets",
    ),
    "bad_offsets": (
        lambda p: write_header(p, _with(b={"data_offsets": [16, "24"]}), 24),
        "data_offsets must be [begin, end] integers",
    ),
    "wrong_byte_count": (
        lambda p: write_header(p, _with(b={"shape": [5]}), 24),
        "data_offsets span 8 bytes, but shape [5] of BF16 is 10 bytes",
    ),
    "overlap": (lambda p: write_header(p, _with(b={"data_offsets": [8, 16], "shape": [4]}), 16), "overlap tensor 'a'"),
    "out_of_range": (lambda p: write_header(p, GOOD, 20), "data_offsets end beyond the data section"),
    "gap": (lambda p: write_header(p, _with(b={"data_offsets": [20, 28]}), 28), "belong to no tensor"),
    "trailing_bytes": (
        lambda p: write_header(p, GOOD, 40),
        "16 bytes at the end of the data section belong to no tensor",
    ),
    "sub_byte_misaligned": (
        lambda p: write_header(p, {"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}),
        "not a whole number of bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_safetensors_header(tmp_path, case):
    write, phrase = CORRUPT[case]
    path = tmp_path / f"{case}.safetensors"
    write(path)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    err = info.value
    assert isinstance(err, ArchsqlError) and isinstance(err, ValueError)
    assert str(path) in str(err) and phrase in str(err), str(err)
    assert err.issues and all(i.file == str(path) for i in err.issues if i.file)


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_safetensors_library_rejects_the_same_files(tmp_path, case):
    pytest.importorskip("numpy")  # safe_open needs its framework
    from safetensors import SafetensorError, safe_open

    path = tmp_path / f"{case}.safetensors"
    CORRUPT[case][0](path)
    with pytest.raises(SafetensorError), safe_open(path, "np"):
        pass


def test_corrupt_header_details(tmp_path):
    path = CORRUPT["non_utf8_name"][0](tmp_path / "x.safetensors")
    with pytest.raises(CheckpointError, match=r'in the string "lay\\xffer\.weight"'):
        read_checkpoint(path)
    path = CORRUPT["unknown_dtype"][0](tmp_path / "y.safetensors")
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    assert info.value.issues[0].hint == "did you mean 'BF16'?" and info.value.issues[0].path == '$["b"].dtype'
    write_header(tmp_path / "z.safetensors", _with(a={"dtype": "F7"}), 24)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(tmp_path / "z.safetensors")
    assert "allowed: BOOL F4" in info.value.issues[0].hint and "F8_E4M3" in info.value.issues[0].hint


def test_all_problems_of_a_file_reported_together(tmp_path):
    header = _with(a={"dtype": "Q9"}, b={"shape": [3]}, c={"dtype": "F32", "shape": [1], "data_offsets": [40, 44]})
    path = write_header(tmp_path / "model.safetensors", header)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    text = str(info.value)
    assert "3 problem(s)" in text, text
    assert "unknown dtype 'Q9'" in text and "shape [3] of BF16 is 6 bytes" in text and "belong to no tensor" in text


# --------------------------------------------------------------------------- shard sets


def shard_set(folder: Path, n_shards: int = 3, per_shard: int = 4) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for s in range(n_shards):
        shard = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        tensors = {f"layers.{s * per_shard + i}.weight": ("BF16", [8, 4]) for i in range(per_shard)}
        write_tensors(folder / shard, tensors)
        weight_map |= dict.fromkeys(tensors, shard)
    index = {"metadata": {"total_size": n_shards * per_shard * 64}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return weight_map


def test_shard_set(tmp_path):
    weight_map = shard_set(tmp_path / "ckpt")
    table = read_checkpoint(tmp_path / "ckpt")
    assert table.num_rows == 12
    assert dict(zip(table["name"].to_pylist(), table["file"].to_pylist(), strict=True)) == weight_map
    assert table.column("checkpoint").unique().to_pylist() == [str(tmp_path / "ckpt")]
    by_index = read_checkpoint(tmp_path / "ckpt" / "model.safetensors.index.json")
    assert rows(by_index) == rows(table)


def test_missing_shards_are_all_listed(tmp_path):
    shard_set(tmp_path, n_shards=4)
    for s in (2, 4):
        (tmp_path / f"model-{s:05d}-of-00004.safetensors").unlink()
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(tmp_path)
    text = str(info.value)
    assert "2 of 4 shards listed in the index are missing" in text
    assert "model-00002-of-00004.safetensors" in text and "model-00004-of-00004.safetensors" in text
    assert "model-00001-of-00004" not in text and len(info.value.issues) == 2


def test_index_and_headers_must_agree(tmp_path):
    weight_map = shard_set(tmp_path)
    weight_map["layers.0.weight"] = "model-00002-of-00003.safetensors"  # really in shard 1
    weight_map["layers.99.weight"] = "model-00003-of-00003.safetensors"  # in no shard
    del weight_map["layers.5.weight"]  # in shard 2's header, not indexed
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(tmp_path)
    text = str(info.value)
    assert str(tmp_path / "model.safetensors.index.json") in text
    assert (
        "'layers.0.weight' to shard 'model-00002-of-00003.safetensors', whose header has no such tensor; it is in 'model-00001-of-00003.safetensors'"
        in text
    )
    assert "'layers.99.weight' to shard 'model-00003-of-00003.safetensors'" in text
    assert "tensor 'layers.5.weight' of shard 'model-00002-of-00003.safetensors' is not in the index" in text


def test_corrupt_shard_problems_collected_across_shards(tmp_path):
    shard_set(tmp_path)
    for s in (1, 3):
        path = tmp_path / f"model-{s:05d}-of-00003.safetensors"
        path.write_bytes(path.read_bytes()[:6])
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(tmp_path)
    assert [Path(i.file).name for i in info.value.issues] == [
        "model-00001-of-00003.safetensors",
        "model-00003-of-00003.safetensors",
    ]


# --------------------------------------------------------------------------- HF cache


def hf_cache(root: Path, repo: str = "org/tiny", commit: str = SHA, ref: str = "main") -> Path:
    """The cache layout huggingface_hub writes: blobs/, refs/<ref>, snapshots/<commit>/ -> blobs."""
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo_dir / "blobs").mkdir(exist_ok=True)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / ref).write_text(commit)
    files = root / "tmp-files"
    shard_set(files, n_shards=2)
    for f in sorted(files.iterdir()):
        blob = repo_dir / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        f.rename(blob)
        (snap / f.name).symlink_to(Path("..", "..", "blobs", blob.name))
    files.rmdir()
    return repo_dir


def test_hf_cache_by_path_and_by_repo_id(tmp_path, monkeypatch):
    repo_dir = hf_cache(tmp_path / "hub")
    snap = read_checkpoint(repo_dir / "snapshots" / SHA)
    assert snap.num_rows == 8 and snap["checkpoint"][0].as_py() == str(repo_dir / "snapshots" / SHA)
    by_folder = read_checkpoint(repo_dir)
    assert by_folder["checkpoint"][0].as_py() == f"hub:org/tiny@{SHA}" and rows(by_folder) == rows(snap)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    by_id = read_checkpoint("org/tiny", offline=True)
    assert by_id.equals(by_folder)
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # HF_HOME/hub
    assert read_checkpoint("hub:org/tiny@main", offline=True).equals(by_folder)
    assert read_checkpoint("org/tiny", offline=True, revision=SHA).equals(by_folder)


def test_hf_cache_other_revision_and_misses(tmp_path, monkeypatch):
    other = "f" * 40
    hf_cache(tmp_path, commit=other, ref="v2")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert read_checkpoint("org/tiny", offline=True, revision="v2")["checkpoint"][0].as_py() == f"hub:org/tiny@{other}"
    with pytest.raises(
        CheckpointError,
        match=r"hub:org/tiny@main: not in the local Hugging Face cache and offline mode refuses the network",
    ):
        read_checkpoint("org/tiny", offline=True)
    with pytest.raises(CheckpointError, match="hub:org/absent@main: not in the local Hugging Face cache"):
        read_checkpoint("org/absent", offline=True)
    with pytest.raises(CheckpointError, match="no such file or folder, and not a Hub repo id"):
        read_checkpoint(tmp_path / "nothing-here")


def test_offline_environment_refuses_the_network(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError, match="offline mode refuses the network"):
        read_checkpoint("org/tiny", cache_dir=tmp_path)


# --------------------------------------------------------------------------- the Hub, on a loopback server


class FakeHub:
    """Serves ``/{repo}/resolve/{revision}/{file}`` for files the test wrote, with HEAD and Range requests,
    the response headers huggingface_hub reads (X-Repo-Commit, ETag, Content-Range) and its error codes."""

    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.log: list[tuple[str, str, str | None, int]] = []  # method, path, range, body bytes sent
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.answer(self, send_body=False)

            def do_GET(self):
                hub.answer(self, send_body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"

    def add(self, repo: str, folder: Path) -> None:
        self.repos[repo] = {f.name: f.read_bytes() for f in folder.iterdir()}

    def answer(self, h: BaseHTTPRequestHandler, send_body: bool) -> None:
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", h.path)
        files = self.repos.get(m.group(1)) if m else None
        data = files.get(m.group(3)) if files else None
        if data is None or m.group(2) not in ("main", SHA):
            code = "RepoNotFound" if files is None else "EntryNotFound" if data is None else "RevisionNotFound"
            self.log.append((h.command, h.path, h.headers.get("Range"), 0))
            h.send_response(404)
            h.send_header("X-Error-Code", code)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        status, body, rng = 200, data, h.headers.get("Range")
        if rng:
            first, last = re.fullmatch(r"bytes=(\d+)-(\d+)", rng).groups()
            body, status = data[int(first) : int(last) + 1], 206
        self.log.append((h.command, h.path, rng, len(body) if send_body else 0))
        h.send_response(status)
        h.send_header("X-Repo-Commit", SHA)
        h.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header("Content-Length", str(len(body)))
        if status == 206:
            h.send_header("Content-Range", f"bytes {first}-{int(first) + len(body) - 1}/{len(data)}")
        h.end_headers()
        if send_body:
            h.wfile.write(body)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "download-cache"))  # the index download lands here
    monkeypatch.delenv("HF_TOKEN", raising=False)
    hub = FakeHub()
    yield hub
    hub.close()


def test_hub_single_file(tmp_path, fake_hub):
    folder = tmp_path / "single"
    folder.mkdir()
    write_tensors(folder / "model.safetensors", {"big.weight": ("F32", [256, 512]), "bias": ("F16", [512])})
    fake_hub.add("org/single", folder)
    table = read_checkpoint("org/single", endpoint=fake_hub.endpoint)
    assert table["checkpoint"][0].as_py() == "hub:org/single@main"
    assert rows(table) == rows(read_checkpoint(folder))
    gets = [entry for entry in fake_hub.log if entry[0] == "GET"]
    assert gets and all(rng is not None for _, _, rng, _ in gets)  # range requests only
    assert sum(sent for *_, sent in fake_hub.log) < 256 * 512 * 4  # the weights never travel


def test_hub_shard_set_with_a_large_header(tmp_path, fake_hub):
    """One shard's header is larger than huggingface_hub's first 100 kB request (a second range request)."""
    folder = tmp_path / "sharded"
    weight_map = shard_set(folder, n_shards=2)
    many = {
        f"model.layers.{i}.mlp.experts.{j}.down_proj.weight": ("BF16", [16, 16]) for i in range(20) for j in range(100)
    }
    write_tensors(folder / "model-00002-of-00002.safetensors", many)
    weight_map = {k: v for k, v in weight_map.items() if v.startswith("model-00001")} | dict.fromkeys(
        many, "model-00002-of-00002.safetensors"
    )
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert struct.unpack("<Q", (folder / "model-00002-of-00002.safetensors").read_bytes()[:8])[0] > 100_000
    fake_hub.add("org/sharded", folder)
    table = read_checkpoint("hub:org/sharded@" + SHA, endpoint=fake_hub.endpoint)
    assert table.num_rows == 4 + 2000 and table["checkpoint"][0].as_py() == f"hub:org/sharded@{SHA}"
    assert rows(table) == rows(read_checkpoint(folder))
    ranges = [
        rng
        for method, path, rng, _ in fake_hub.log
        if method == "GET" and path.endswith("/model-00002-of-00002.safetensors")
    ]
    assert len(ranges) == 2 and ranges[0] == "bytes=0-100000" and ranges[1].startswith("bytes=8-")
    assert all(rng for method, path, rng, _ in fake_hub.log if method == "GET" and path.endswith(".safetensors"))


def test_hub_errors(tmp_path, fake_hub):
    folder = tmp_path / "bad"
    folder.mkdir()
    write_header(folder / "model.safetensors", _with(b={"dtype": "BF61"}))
    fake_hub.add("org/bad", folder)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint("org/bad", endpoint=fake_hub.endpoint)
    assert "hub:org/bad@main/model.safetensors" in str(info.value) and "unknown dtype 'BF61'" in str(info.value)
    with pytest.raises(CheckpointError, match=r"hub:org/missing@main: no model\.safetensors .* or no such repo"):
        read_checkpoint("org/missing", endpoint=fake_hub.endpoint)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("no weights")
    fake_hub.add("org/empty", empty)
    with pytest.raises(CheckpointError, match=r"no model\.safetensors or model\.safetensors\.index\.json"):
        read_checkpoint("org/empty", endpoint=fake_hub.endpoint)
    with pytest.raises(CheckpointError, match="hub:org/missing@main: cannot read the repo"):
        read_checkpoint("org/missing", endpoint="http://hub.invalid")  # refused by the no_internet guard


# --------------------------------------------------------------------------- GGUF

_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _gguf_value(vtype: int, value) -> bytes:
    if vtype == 8:
        raw = value.encode() if isinstance(value, str) else value
        return struct.pack("<Q", len(raw)) + raw
    if vtype == 9:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(_gguf_value(etype, v) for v in items)
    return struct.pack("<" + _FMT[vtype], value)


def gguf_file(
    path: Path, kvs: list, tensors: list, *, version: int = 3, alignment: int = 32, data_size: int | None = None
) -> Path:
    """A GGUF file written by hand: kvs [(key, type, value)], tensors [(name, ggml dims, ggml type, offset)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += _gguf_value(8, key) + struct.pack("<I", vtype) + _gguf_value(vtype, value)
    for name, dims, gtype, offset in tensors:
        out += _gguf_value(8, name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, GGML_ID[gtype], offset)
    out += b"\0" * (-len(out) % alignment)
    if data_size is None:
        data_size = max((o + ggml_nbytes(t, math.prod(d)) for _, d, t, o in tensors), default=0)
    with open(path, "wb") as f:
        f.write(out)
        f.truncate(len(out) + data_size)
    return path


TINY_KVS = [
    ("general.architecture", 8, "llama"),
    ("general.alignment", 4, 32),
    ("llama.block_count", 4, 1),
    ("llama.rope.freq_base", 6, 10000.0),
    ("tokenizer.ggml.add_bos_token", 7, True),
    ("tokenizer.ggml.tokens", 9, (8, ["<s>", "</s>", "héllo"])),
    ("tokenizer.ggml.token_type", 9, (5, [3, 3, 1])),
    ("nested", 9, (9, [(4, [1, 2]), (8, ["x"])])),
    ("big", 10, 2**40),
    ("neg", 11, -5),
    ("pi", 12, 3.25),
]
TINY_TENSORS = [
    ("token_embd.weight", [256, 2], "Q4_K", 0),  # 2 blocks of 144 bytes
    ("output_norm.weight", [8], "F32", 288),
    ("output.weight", [512, 1], "Q6_K", 320),  # 2 blocks of 210 bytes
]


@pytest.mark.parametrize("version", [2, 3])
def test_tiny_gguf(tmp_path, version):
    path = gguf_file(tmp_path / "tiny.gguf", TINY_KVS, TINY_TENSORS, version=version)
    header = read_gguf_header(path)
    assert header.version == version and header.alignment == 32
    meta = header.metadata
    assert meta["general.architecture"] == "llama" and meta["tokenizer.ggml.tokens"] == ["<s>", "</s>", "héllo"]
    assert meta["tokenizer.ggml.token_type"] == [3, 3, 1] and meta["nested"] == [[1, 2], ["x"]]
    assert (meta["big"], meta["neg"], meta["pi"], meta["tokenizer.ggml.add_bos_token"]) == (2**40, -5, 3.25, True)
    table = read_checkpoint(path)
    assert set(table["format"].to_pylist()) == {"gguf"}
    assert rows(table) == sorted(
        [
            ("tiny.gguf", "output.weight", "Q6_K", [1, 512], 320, 740),
            ("tiny.gguf", "output_norm.weight", "F32", [8], 288, 320),
            ("tiny.gguf", "token_embd.weight", "Q4_K", [2, 256], 0, 288),
        ]
    )


def test_ggml_sizes_reproduce_the_real_gguf_offsets():
    """Independent ground truth: consecutive data offsets of the real Q4_K_M file are each tensor's
    byte size (our block table) rounded up to the 32-byte alignment."""
    tensors = sorted(json.loads(GGUF_REAL.read_text())["tensors"], key=lambda t: t["offset"])
    assert len(tensors) == 339 and {t["ggml_type"] for t in tensors} == {"Q4_K", "Q6_K", "F32"}
    for this, nxt in itertools.pairwise(tensors):
        nbytes = ggml_nbytes(this["ggml_type"], math.prod(this["ggml_shape"]))
        assert nxt["offset"] - this["offset"] == -(-nbytes // 32) * 32, this["name"]


def test_real_gguf_header_rebuilt(tmp_path):
    """The real inventory (all 339 tensor infos, the KV block with its 152k-entry tokenizer arrays)
    written back as a GGUF file and read: names, types, row-major shapes and offsets as recorded."""
    real = json.loads(GGUF_REAL.read_text())
    kvs = []
    for key, value in real["kv"].items():
        if isinstance(value, dict):
            etype, n = value["array_element_type"], value["length"]
            kvs.append((key, 9, (etype, [f"t{i}" for i in range(n)] if etype == 8 else [1] * n)))
        elif isinstance(value, bool):
            kvs.append((key, 7, value))
        else:
            kvs.append((key, 8 if isinstance(value, str) else 6 if isinstance(value, float) else 4, value))
    infos = [(t["name"], t["ggml_shape"], t["ggml_type"], t["offset"]) for t in real["tensors"]]
    header = read_gguf_header(gguf_file(tmp_path / "model.gguf", kvs, infos))
    assert header.metadata["qwen2.block_count"] == 28 and len(header.metadata["tokenizer.ggml.tokens"]) == 152064
    t = header.tensors
    assert t.names == [x["name"] for x in real["tensors"]]
    assert t.dtypes == [x["ggml_type"] for x in real["tensors"]]
    assert t.shapes == [x["shape_row_major"] for x in real["tensors"]]
    assert t.begins == [x["offset"] for x in real["tensors"]]


GGUF_CORRUPT = {
    "bad_magic": (lambda p: p.write_bytes(b"GGML" + b"\0" * 40), "not a GGUF file"),
    "big_endian": (
        lambda p: p.write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 0, 0)),
        "big-endian GGUF files are not supported",
    ),
    "version_1": (lambda p: p.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0)), "unsupported GGUF version 1"),
    "truncated": (
        lambda p: p.write_bytes(gguf_file(p, TINY_KVS, TINY_TENSORS).read_bytes()[:120]),
        "file ends inside the GGUF header (reading metadata",
    ),
    "unknown_value_type": (
        lambda p: p.write_bytes(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gguf_value(8, "k") + struct.pack("<I", 13) + b"\0" * 16
        ),
        "unknown GGUF value type 13",
    ),
    "overlap": (lambda p: gguf_file(p, [], [("a", [64], "F32", 0), ("b", [64], "F32", 128)]), "overlaps tensor 'a'"),
    "misaligned": (
        lambda p: gguf_file(p, [], [("a", [64], "F32", 0), ("b", [8], "F32", 260)]),
        "offset 260 is not aligned to 32",
    ),
    "out_of_range": (
        lambda p: gguf_file(p, [], [("a", [64], "F32", 0)], data_size=100),
        "ends beyond the end of the file",
    ),
    "partial_block": (
        lambda p: gguf_file(p, [], [("a", [100, 2], "Q4_K", 0)], data_size=1000),
        "innermost dim 100 is not a multiple of the Q4_K block of 256",
    ),
    "duplicate": (
        lambda p: gguf_file(p, [], [("a", [8], "F32", 0), ("a", [8], "F32", 32)]),
        "tensor 'a' appears twice",
    ),
    "non_utf8_name": (lambda p: gguf_file(p, [], [(b"bl\xffk", [8], "F32", 0)]), "is not valid UTF-8"),
    "too_many_dims": (
        lambda p: gguf_file(p, [], [("a", [1, 1, 1, 1, 8], "F32", 0)]),
        "5 dims, more than ggml's 4 (reading tensor info #0)",
    ),
}


@pytest.mark.parametrize("case", sorted(GGUF_CORRUPT))
def test_corrupt_gguf_header(tmp_path, case):
    write, phrase = GGUF_CORRUPT[case]
    path = tmp_path / f"{case}.gguf"
    write(path)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    assert str(path) in str(info.value) and phrase in str(info.value), str(info.value)


def test_unknown_ggml_type(tmp_path):
    path = gguf_file(tmp_path / "x.gguf", [], [("a", [8], "F32", 0)])
    data = bytearray(path.read_bytes())
    at = 24 + 8 + 1 + 4 + 8  # magic, version, counts | name | n_dims | dims -> the type id
    data[at : at + 4] = struct.pack("<I", 99)
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="unknown ggml type id 99") as info:
        read_checkpoint(path)
    assert "Q4_K" in info.value.issues[0].hint
