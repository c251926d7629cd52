"""Header ingestion speed (a script, not a test): ``python benchmarks/bench_ingest.py``
(archsql installed, or ``PYTHONPATH=.`` from the repository root).

Builds a synthetic shard set in a temp folder: ``--shards`` safetensors files (default 1,000) holding
``--tensors`` tensors in all (default 100,000, MoE-style names and shapes, BF16), each file a real header
followed by a sparse data section (``truncate``), so disk use is the headers only; plus the
``model.safetensors.index.json`` that maps every tensor to its shard.  Then times
``archsql.ingest.read_checkpoint`` on the folder (every header read and checked, the index reconciled
with the headers, the Arrow table built), best of ``--repeat`` after a warm-up, pinned to ``--cores``
CPUs where the OS allows.

Target: < 5 s for 1,000 shards / 100,000 tensors on 2 cores.  ``--strict`` exits with 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

from archsql.ingest.checkpoint import read_checkpoint

TARGET_S = 5.0
PROJS = (("gate_proj", (768, 2048)), ("up_proj", (768, 2048)), ("down_proj", (2048, 768)))


def tensor_names(n: int):
    """n (name, shape) pairs: routed-expert projections of layer after layer, 128 experts a layer."""
    i = 0
    while True:
        layer, rest = divmod(i, 128 * len(PROJS))
        expert, proj = divmod(rest, len(PROJS))
        name, shape = PROJS[proj]
        yield f"model.layers.{layer}.mlp.experts.{expert}.{name}.weight", shape
        i += 1
        if i == n:
            return


def build(folder: Path, n_shards: int, n_tensors: int) -> int:
    """Write the shard set; returns the apparent (sparse) data bytes."""
    names = list(tensor_names(n_tensors))
    per_shard = -(-n_tensors // n_shards)
    weight_map, total = {}, 0
    for s in range(n_shards):
        shard = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        header, pos = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in names[s * per_shard : (s + 1) * per_shard]:
            size = shape[0] * shape[1] * 2
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [pos, pos + size]}
            weight_map[name] = shard
            pos += size
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        with open(folder / shard, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + pos)
        total += pos
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return total


def header_length(path: Path) -> int:
    with path.open("rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def pin(cores: int) -> str:
    if cores <= 0 or not hasattr(os, "sched_setaffinity"):
        return f"all {os.cpu_count()} CPUs"
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    os.sched_setaffinity(0, cpus)
    return f"{len(cpus)} CPU(s) {cpus}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=1_000)
    parser.add_argument("--tensors", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2, help="pin to this many CPUs (0: no pinning)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)

    cpus = pin(args.cores)
    with tempfile.TemporaryDirectory(prefix="archsql-bench-ingest-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        apparent = build(folder, args.shards, args.tensors)
        build_s = time.perf_counter() - t0
        on_disk = sum(os.stat(p).st_blocks * 512 for p in folder.iterdir())
        header_bytes = sum(header_length(p) for p in folder.glob("*.safetensors"))
        table = read_checkpoint(folder)  # warm-up (page cache, imports)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            table = read_checkpoint(folder)
            times.append(time.perf_counter() - t0)
    best = min(times)
    n = table.num_rows

    print(f"archsql header ingestion benchmark ({cpus})")
    print(
        f"  synthetic shard set: {args.shards:,} shards, {args.tensors:,} tensors, headers {header_bytes / 1e6:.1f} MB, "
        f"apparent data {apparent / 1e9:.1f} GB, on disk {on_disk / 1e6:.1f} MB; built in {build_s:.2f} s"
    )
    print(
        f"  read_checkpoint(folder) -> {n:,} rows: best of {args.repeat} {best:.3f} s "
        f"(all: {', '.join(f'{t:.3f}' for t in times)} s; {n / best:,.0f} tensors/s, {best / args.shards * 1e3:.2f} ms/shard)"
    )
    checks = [
        (f"{args.shards:,} shards / {args.tensors:,} tensors < {TARGET_S:g} s", best < TARGET_S, f"{best:.3f} s"),
        ("every tensor read", n == args.tensors, f"{n:,} rows"),
    ]
    print("targets:")
    for label, ok, got in checks:
        print(f"  [{'pass' if ok else 'FAIL'}] {label}: {got}")
    return 1 if args.strict and not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
