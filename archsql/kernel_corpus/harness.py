"""The measurement harness: run kernel shapes through providers, check them against a
reference, time them, and append validated rows to the corpus.

Every op kind the harness measures has one small declarative record (:class:`OpReference`):
how to build its inputs from a signature, its **math contract** as a float64 eager
reference, and its PyTorch eager implementation in the measured dtype.  The kernels that
are measured come from **providers** (:mod:`archsql.kernel_corpus.providers`): PyTorch eager
always, and FlashInfer, flash-attn, DeepGEMM (or a registered provider) when their module
imports and the device suits them — the others are reported as skipped, with the reason.
A run:

1. builds inputs (seeded) on the device, computes the float64 reference once per shape;
2. runs every provider that has a kernel for the shape and dtype, compares its output to
   the reference: max |out − ref| / max |ref| must stay within the dtype's tolerance (FP8
   loose, BF16/FP16 medium, FP32 strict) — a failed check (or an output of the wrong
   shape) is recorded as ``check_status = 'failed'`` and the ingest rejects the row; a
   kernel that raises is reported as a failed provider run, never as a measurement;
3. times each kernel: ``warmup`` calls, then ``repeats`` timed calls (CUDA events on a
   GPU, ``perf_counter_ns`` on the CPU), the median is ``latency_us``;
4. stamps the versions (python, torch, CUDA, device, every provider used) on the run's
   source — each row carries its provider's library and version — and hands the rows to
   the common ingest (:class:`~archsql.kernel_corpus.ingest.CorpusWriter`), which
   validates them like any other source (implied MFU/MBU > 1 rejected).

The same code runs on the CPU with tiny shapes (the tests) and unchanged on a CUDA GPU.
"""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql import __version__
from archsql.errors import CorpusError, Issue, unknown_name
from archsql.kernel_corpus.ingest import CorpusWriter, IngestReport, Source
from archsql.kernel_corpus.schema import CORPUS_SCHEMA

# max |out - ref| / max |ref| a provider may show, by measured dtype
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2, "fp8": 1.5e-1}
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}
ORIGIN = "archsql-bench"

# torch.cuda.get_device_name() -> gpus.gpu (the names aiconfigurator-core's data reports)
DEVICE_GPUS = {
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA B200": "B200 (HGX/DGX B200)",
    "NVIDIA B300 SXM6 AC": "B300 (HGX B300)",
    "NVIDIA GB200": "GB200 (per GPU in NVL72)",
    "NVIDIA GB300": "GB300 (per GPU in NVL72)",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
    "NVIDIA L40S": "L40S",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000 Blackwell Server",
}


@dataclass(frozen=True)
class Shape:
    """One kernel shape to measure: op kind, phase and signature fields (corpus columns)."""

    op_kind: str
    fields: tuple[tuple[str, Any], ...]
    phase: str | None = None
    count: int = 1  # kernel launches per step in the planned model (plan information)
    nodes: tuple[str, ...] = ()  # the node uids that hit it

    @classmethod
    def of(cls, op_kind: str, phase: str | None = None, count: int = 1, nodes=(), **fields) -> Shape:
        return cls(op_kind, tuple(sorted(fields.items())), phase, count, tuple(nodes))

    @property
    def key(self) -> tuple:
        return (self.op_kind, self.phase, self.fields)

    def get(self, name: str, default=None):
        return dict(self.fields).get(name, default)

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.fields if v is not None)


@dataclass(frozen=True)
class OpReference:
    """An op kind the harness can measure: inputs, the measured provider, the contract."""

    op_kind: str
    kernel: str  # the provider's name, stored as the row's kernel
    make_inputs: Callable[[Shape, Any, Any, Any], tuple]  # (shape, dtype, device, generator)
    provider: Callable[..., Any]  # torch eager in the measured dtype
    reference: Callable[..., Any]  # float64 math contract


def _gemm_inputs(shape, dtype, device, gen):
    import torch

    m, n, k = shape.get("m"), shape.get("n"), shape.get("k")
    x = torch.randn(m, k, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    w = (torch.randn(n, k, generator=gen, dtype=torch.float32) / k**0.5).to(device=device, dtype=dtype)
    return x, w


def _gemm(x, w):
    import torch

    return torch.nn.functional.linear(x, w)


def _gemm_ref(x, w):
    return x.double() @ w.double().T


def _attention_inputs(shape, dtype, device, gen):
    import torch

    b, s, c = shape.get("batch"), shape.get("q_len"), shape.get("kv_len")
    h, kvh, d = shape.get("heads"), shape.get("kv_heads"), shape.get("head_dim")
    dv = shape.get("v_head_dim") or d
    q = torch.randn(b, h, s, d, generator=gen).to(device=device, dtype=dtype)
    k = torch.randn(b, kvh, c, d, generator=gen).to(device=device, dtype=dtype)
    v = torch.randn(b, kvh, c, dv, generator=gen).to(device=device, dtype=dtype)
    mask = _causal_mask(s, c, shape.get("window_size") or 0, device)
    return q, k, v, mask


def _causal_mask(s: int, c: int, window: int, device):
    """True where query i (at position c - s + i) may attend key j: j <= pos, and within
    the window (pos - j < window) when there is one."""
    import torch

    pos = torch.arange(c - s, c, device=device).unsqueeze(1)
    key = torch.arange(c, device=device).unsqueeze(0)
    allowed = key <= pos
    if window > 0:
        allowed &= pos - key < window
    return allowed


def _attention(q, k, v, mask):
    import torch

    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _attention_ref(q, k, v, mask):
    import torch

    group = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.double().repeat_interleave(group, dim=1), v.double().repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _rmsnorm_inputs(shape, dtype, device, gen):
    import torch

    t, hdim = shape.get("tokens"), shape.get("hidden")
    x = torch.randn(t, hdim, generator=gen).to(device=device, dtype=dtype)
    w = (1 + 0.1 * torch.randn(hdim, generator=gen)).to(device=device, dtype=dtype)
    return x, w


RMS_EPS = 1e-6


def _rmsnorm(x, w):
    import torch

    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, RMS_EPS)


def _rmsnorm_ref(x, w):
    x = x.double()
    return x * (x.pow(2).mean(-1, keepdim=True) + RMS_EPS).rsqrt() * w.double()


def _grouped_inputs(shape, dtype, device, gen):
    """Tokens, expert weights [experts, n, k] and a balanced routing: token t's j-th expert
    is (t * topk + j) mod experts."""
    import torch

    t, e, topk, n, k = (shape.get(x) for x in ("tokens", "experts", "topk", "n", "k"))
    x = torch.randn(t, k, generator=gen).to(device=device, dtype=dtype)
    w = (torch.randn(e, n, k, generator=gen) / k**0.5).to(device=device, dtype=dtype)
    experts = (torch.arange(t).unsqueeze(1) * topk + torch.arange(topk).unsqueeze(0)) % e
    return x, w, experts.to(device)


def _grouped(x, w, experts):
    """Eager grouped GEMM: one matmul per expert over the rows routed to it."""
    import torch

    topk = experts.shape[1]
    flat = experts.reshape(-1)
    rows = torch.arange(x.shape[0], device=x.device).repeat_interleave(topk)
    out = torch.empty(flat.shape[0], w.shape[1], device=x.device, dtype=x.dtype)
    for e in torch.unique(flat).tolist():
        idx = (flat == e).nonzero(as_tuple=True)[0]
        out[idx] = torch.nn.functional.linear(x[rows[idx]], w[e])
    return out


def _grouped_ref(x, w, experts):
    topk = experts.shape[1]
    xs = x.double().repeat_interleave(topk, dim=0)
    ws = w.double()[experts.reshape(-1)]
    return (ws @ xs.unsqueeze(-1)).squeeze(-1)


REFERENCES: dict[str, OpReference] = {
    r.op_kind: r
    for r in (
        OpReference("gemm", "torch.nn.functional.linear", _gemm_inputs, _gemm, _gemm_ref),
        OpReference(
            "attention",
            "torch.nn.functional.scaled_dot_product_attention",
            _attention_inputs,
            _attention,
            _attention_ref,
        ),
        OpReference("rmsnorm", "torch.nn.functional.rms_norm", _rmsnorm_inputs, _rmsnorm, _rmsnorm_ref),
        OpReference("grouped_gemm", "torch eager loop over experts", _grouped_inputs, _grouped, _grouped_ref),
    )
}

TINY_SHAPES: tuple[Shape, ...] = (
    Shape.of("gemm", m=8, n=32, k=64),
    Shape.of("attention", "prefill", batch=1, q_len=16, kv_len=16, heads=4, kv_heads=2, head_dim=16),
    Shape.of("attention", "decode", batch=2, q_len=1, kv_len=32, heads=4, kv_heads=2, head_dim=16),
    Shape.of("rmsnorm", tokens=8, hidden=64),
    Shape.of("grouped_gemm", tokens=8, experts=4, topk=2, n=32, k=16, routing="balanced"),
)


@dataclass
class Measurement:
    shape: Shape
    dtype: str
    kernel: str
    latency_us: float
    times_us: list[float]
    check_error: float
    tolerance: float
    library: str = "torch"  # the provider it ran through
    library_version: str | None = None

    @property
    def passed(self) -> bool:
        return self.check_error <= self.tolerance


@dataclass
class ProviderUse:
    """What a run did with one provider: used (with its version) or skipped (why)."""

    name: str
    version: str | None
    used: bool
    reason: str | None = None  # why it was skipped
    measured: int = 0  # measurements it gave
    failed: int = 0  # of them, outputs that disagree with the reference


@dataclass(frozen=True)
class Skip:
    """A shape a used provider did not measure, and why (no kernel, dtype, it raised)."""

    provider: str
    shape: Shape
    reason: str


@dataclass
class BenchRun:
    measurements: list[Measurement] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    warmup: int = 0
    report: IngestReport | None = None
    providers: list[ProviderUse] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)


def _torch():
    try:
        import torch
    except ImportError:
        raise CorpusError(
            "the harness needs PyTorch",
            [Issue("PyTorch is not installed", hint="pip install torch  (CPU build: pip install torch==2.13.0)")],
        ) from None
    return torch


def environment(device: str) -> dict:
    """The versions a run is stamped with."""
    torch = _torch()
    env = {
        "archsql": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "device": device,
    }
    if device.startswith("cuda"):
        env["cuda"] = torch.version.cuda
        env["device_name"] = torch.cuda.get_device_name(torch.device(device))
    else:
        env["device_name"] = _cpu_name()
        env["threads"] = torch.get_num_threads()
    return env


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def measure(
    shapes: Sequence[Shape],
    *,
    dtype: str = "fp32",
    device: str = "cpu",
    warmup: int = 2,
    repeats: int = 5,
    seed: int = 0,
    providers: Sequence[str] | None = None,
) -> BenchRun:
    """Check and time every shape (op kinds the harness knows) on ``device``, through every
    available provider (or the named ones; PyTorch eager always)."""
    from archsql.kernel_corpus import providers as registry

    torch = _torch()
    if dtype not in TORCH_DTYPES:
        message, hint = unknown_name("dtype", dtype, TORCH_DTYPES)
        raise CorpusError(message, [Issue(message, hint=hint)])
    if warmup < 0 or repeats < 1:
        raise CorpusError("warm-up must be >= 0 and repeats >= 1")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CorpusError(f"device {device} asked for, but torch sees no CUDA device (torch {torch.__version__})")
    unknown = sorted({s.op_kind for s in shapes} - set(REFERENCES))
    if unknown:
        raise CorpusError(
            f"the harness has no reference for: {', '.join(unknown)}",
            [Issue("measurable op kinds: " + ", ".join(sorted(REFERENCES)))],
        )
    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    run = BenchRun(environment=environment(device), warmup=warmup)
    available = []
    for provider in registry.providers(list(providers) if providers else None):
        status = provider.availability(device)
        run.providers.append(ProviderUse(provider.name, status.version, status.available, status.reason))
        if status.available:
            available.append((provider, status, run.providers[-1]))
    for shape in shapes:
        ref = REFERENCES[shape.op_kind]
        gen = torch.Generator().manual_seed(seed)
        try:
            inputs = ref.make_inputs(shape, torch_dtype, torch.device(device), gen)
            expected = ref.reference(*inputs)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise CorpusError(
                f"{shape.op_kind} {shape.describe()}: the inputs or the reference cannot be built in {dtype} "
                f"on {device}",
                [Issue(str(exc).splitlines()[0])],
            ) from None
        for provider, status, use in available:
            why = provider.unsupported(shape, dtype)
            if why is not None:
                run.skips.append(Skip(provider.name, shape, why))
                continue
            kernel = provider.kernel(shape)
            try:
                fn = kernel.prepare(status.module, shape, inputs, torch.device(device))
                out = fn()
            except Exception as exc:  # a library's failure is reported, not raised
                first = (str(exc).splitlines() or [""])[0]
                run.skips.append(Skip(provider.name, shape, f"{kernel.kernel} raised {type(exc).__name__}: {first}"))
                continue
            error = _check_error(out, expected)
            times = _time(fn, warmup, repeats, device)
            m = Measurement(
                shape, dtype, kernel.kernel, statistics.median(times), times, error, TOLERANCE[dtype],
                provider.name, status.version,
            )  # fmt: skip
            run.measurements.append(m)
            use.measured += 1
            use.failed += not m.passed
    if not run.measurements:
        reasons = [f"{p.name}: {p.reason}" for p in run.providers if not p.used]
        reasons += [f"{s.provider} {s.shape.op_kind} {s.shape.describe()}: {s.reason}" for s in run.skips]
        raise CorpusError(
            f"nothing measured in {dtype} on {device}",
            [Issue(r) for r in reasons] or [Issue("no shapes")],
        )
    run.environment["providers"] = {p.name: p.version for p in run.providers if p.used and p.measured}
    return run


def _check_error(out, expected) -> float:
    """max |out − ref| / max |ref|; infinite when the output has the wrong shape or is not
    a tensor (so the check fails and the row is rejected, never kept)."""
    shape = getattr(out, "shape", None)
    if shape is None or tuple(shape) != tuple(expected.shape):
        return float("inf")
    scale = expected.abs().max().item() or 1.0
    error = (out.double().to(expected.device) - expected).abs().max().item() / scale
    return error if error == error else float("inf")  # NaN output: failed


def _time(fn: Callable[[], Any], warmup: int, repeats: int, device: str) -> list[float]:
    torch = _torch()
    for _ in range(warmup):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3)  # ms -> us
        return times
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return times


def rows(run: BenchRun, gpu: str, source: Source) -> pa.Table:
    """The run's measurements as staged corpus rows (for :meth:`CorpusWriter.ingest`)."""
    env = run.environment
    records = []
    for i, m in enumerate(run.measurements):
        row: dict[str, Any] = dict.fromkeys(CORPUS_SCHEMA.names)
        row.update(dict(m.shape.fields))
        row.update(
            source=source.name,
            source_key=source.key,
            source_hash=source.hash,
            source_row=i,
            op_kind=m.shape.op_kind,
            op_name=m.shape.op_kind,
            phase=m.shape.phase,
            gpu=gpu,
            device_name=env.get("device_name"),
            library=m.library,
            library_version=m.library_version,
            library_version_reported=m.library_version,
            kernel=m.kernel,
            dtype=m.dtype,
            tp=1,
            latency_us=m.latency_us,
            check_status="passed" if m.passed else "failed",
            check_error=m.check_error,
            check_tolerance=m.tolerance,
            attrs=json.dumps(
                {
                    "warmup": run.warmup,
                    "repeats": len(m.times_us),
                    "min_us": min(m.times_us),
                    "max_us": max(m.times_us),
                    "reference": "float64 eager",
                    "device": env.get("device"),
                },
                sort_keys=True,
            ),
        )
        records.append(row)
    table = pa.Table.from_pylist(records, schema=CORPUS_SCHEMA)
    issue = pa.struct([("field", pa.string()), ("reason", pa.string()), ("value", pa.string())])
    table = table.append_column("__issues", pa.nulls(table.num_rows, pa.list_(issue)))
    return table.append_column("__note", pa.array(["the harness times in microseconds"] * table.num_rows))


def bench(
    db: str | Path | None,
    shapes: Sequence[Shape],
    *,
    dtype: str = "fp32",
    device: str = "cpu",
    warmup: int = 2,
    repeats: int = 5,
    gpu: str | None = None,
    providers: Sequence[str] | None = None,
) -> BenchRun:
    """Measure ``shapes`` and, when ``db`` is given, append the validated rows."""
    run = measure(shapes, dtype=dtype, device=device, warmup=warmup, repeats=repeats, providers=providers)
    if db is None:
        return run
    if gpu is None:
        gpu = "cpu" if device == "cpu" else DEVICE_GPUS.get(run.environment.get("device_name", ""), "")
        if not gpu:
            raise CorpusError(
                f"which GPU is '{run.environment.get('device_name')}'? pass --gpu with its gpus.gpu name",
            )
    payload = json.dumps(
        [(m.shape.key, m.dtype, m.library, m.kernel, m.latency_us, m.times_us) for m in run.measurements],
        default=str,
        sort_keys=True,
    )
    digest = hashlib.sha256(f"{payload}{time.time_ns()}".encode()).hexdigest()
    source = Source(
        key=f"{ORIGIN}:{digest[:12]}",
        name=f"{ORIGIN} {__version__}",
        content_sha256=digest,
        origin=ORIGIN,
        location=f"{platform.node()} {device}",
        environment={**run.environment, "warmup": warmup, "repeats": repeats},
    )
    table = rows(run, gpu, source)
    with CorpusWriter(db) as writer:
        writer.ingest([source], table)
    run.report = writer.report
    return run


__all__ = ["REFERENCES", "TINY_SHAPES", "TOLERANCE", "BenchRun", "ProviderUse", "Shape", "Skip", "bench", "measure"]
