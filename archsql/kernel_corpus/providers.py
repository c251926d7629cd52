"""Kernel providers of the harness: who can run an op kind, where, and in which version.

A :class:`Provider` is one library whose kernels the harness can time against the eager
reference: its import name (availability is "the module imports"), the distribution its
version is read from, the device types and GPU generations it runs on, and one
:class:`ProviderKernel` per op kind it implements.  A kernel adapts the harness inputs
(the reference layout of :mod:`archsql.kernel_corpus.harness`) to the library's call and
returns a zero-argument callable producing the output in the reference layout, so the
harness checks and times every provider the same way.

PyTorch eager (:data:`TORCH`) is always there; the others are used only when their module
imports and the device suits them, and are otherwise reported as skipped with the reason:

================  =====================  ==================================================
provider          op kinds (dtypes)      call
================  =====================  ==================================================
``flashinfer``    attention prefill      ``BatchPrefillWithRaggedKVCacheWrapper.plan/run``
                  (fp16, bf16)           (NHD, causal, ``window_left = window - 1``)
                  attention decode       ``BatchDecodeWithPagedKVCacheWrapper.plan/run``
                  (fp16, bf16)           (NHD pages of 16)
                  rmsnorm (fp16, bf16)   ``flashinfer.norm.rmsnorm``
``flash-attn``    attention prefill      ``flash_attn_func`` (bottom-right causal mask,
                  (fp16, bf16)           ``window_size = (window - 1, 0)``)
                  attention decode       ``flash_attn_with_kvcache`` (``cache_seqlens``)
``deep-gemm``     gemm (bf16, fp8)       ``bf16_gemm_nt`` / ``fp8_gemm_nt`` with unit
                  on SM90+               block scales (``gemm_fp8_fp8_bf16_nt`` before 2.0)
================  =====================  ==================================================

The wrappers follow each library's documented API; none of the libraries could be run
where this was written (no GPU), so a library version whose API differs fails at run time
and is reported as a failed provider, never as a measurement.  Tests register their own
providers with :func:`register` (a fake module in ``sys.modules``) and run these adapters
over modules emulating the documented calls on the CPU.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archsql.errors import CorpusError

# A kernel's prepare step: (library module, shape, inputs in the reference layout, device)
# -> a zero-argument callable whose result is the output in the reference layout.
Prepare = Callable[[Any, Any, tuple, Any], Callable[[], Any]]


@dataclass(frozen=True)
class ProviderKernel:
    """One op kind a provider implements."""

    op_kind: str
    kernel: str  # stored as the row's kernel
    dtypes: tuple[str, ...]  # measured dtypes it accepts
    prepare: Prepare
    phases: tuple[str | None, ...] | None = None  # None: every phase
    # a reason the kernel cannot take this shape (head dim, divisibility), or None
    unsupported: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Availability:
    """Whether a provider can run on a device: its version when it imports."""

    available: bool
    version: str | None = None
    reason: str | None = None
    module: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Provider:
    """A library the harness can measure: availability, version, kernels."""

    name: str  # stored as the row's library
    module: str  # import name
    distribution: str | None  # the installed distribution to read the version from
    kernels: tuple[ProviderKernel, ...]
    devices: tuple[str, ...] = ("cuda",)  # device types (torch.device(...).type)
    min_capability: tuple[int, int] | None = None  # CUDA compute capability
    reference: bool = False  # the always-present eager reference provider

    def kernel(self, shape) -> ProviderKernel | None:
        """The kernel for ``shape``'s op kind and phase (None: the provider has none)."""
        return next(
            (k for k in self.kernels if k.op_kind == shape.op_kind and (k.phases is None or shape.phase in k.phases)),
            None,
        )

    def availability(self, device: str) -> Availability:
        """Import the module (once per run) and check the device; never raises."""
        kind = device.split(":", 1)[0]
        if importlib.util.find_spec(self.module.split(".", 1)[0]) is None:
            hint = f" (pip install {self.distribution})" if self.distribution else ""
            return Availability(False, reason=f"not installed: no module {self.module!r}{hint}")
        if kind not in self.devices:
            return Availability(False, reason=f"runs on {' / '.join(self.devices)}, not on {kind}")
        try:
            module = importlib.import_module(self.module)
        except Exception as exc:  # a broken install is a reason, not a crash
            return Availability(False, reason=f"import {self.module} failed: {type(exc).__name__}: {exc}")
        version = _version(module, self.distribution)
        if self.min_capability is not None and kind == "cuda":
            import torch

            capability = torch.cuda.get_device_capability(torch.device(device))
            if tuple(capability) < self.min_capability:
                need = ".".join(map(str, self.min_capability))
                got = ".".join(map(str, capability))
                return Availability(False, version, f"needs compute capability {need}+, the device has {got}")
        return Availability(True, version, module=module)

    def unsupported(self, shape, dtype: str) -> str | None:
        """Why this provider does not measure ``shape`` in ``dtype`` (None: it does)."""
        kernel = self.kernel(shape)
        if kernel is None:
            phase = f" {shape.phase}" if shape.phase else ""
            return f"no {shape.op_kind}{phase} kernel"
        if dtype not in kernel.dtypes:
            return f"{kernel.kernel} takes {', '.join(kernel.dtypes)}, not {dtype}"
        if kernel.unsupported is not None:
            return kernel.unsupported(shape)
        return None


def _version(module: Any, distribution: str | None) -> str | None:
    if distribution:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            pass
    version = getattr(module, "__version__", None)
    return str(version) if version is not None else None


# -- PyTorch eager: the reference implementation in the measured dtype -------------------


def _torch_prepare(module, shape, inputs, device):
    from archsql.kernel_corpus.harness import REFERENCES  # read at run time: tests replace entries

    provider = REFERENCES[shape.op_kind].provider
    return lambda: provider(*inputs)


def _torch_kernels() -> tuple[ProviderKernel, ...]:
    from archsql.kernel_corpus.harness import REFERENCES, TORCH_DTYPES

    return tuple(ProviderKernel(op, ref.kernel, tuple(TORCH_DTYPES), _torch_prepare) for op, ref in REFERENCES.items())


# -- FlashInfer ------------------------------------------------------------------------------

_WORKSPACE_BYTES = 128 * 1024 * 1024
_PAGE = 16


def _window_left(shape) -> int:
    window = shape.get("window_size") or 0
    return window - 1 if window > 0 else -1


def _flashinfer_prefill(fi, shape, inputs, device):
    """q [b, h, s, d], k/v [b, kvh, c, d] -> ragged NHD ([b*s, h, d], [b*c, kvh, d])."""
    import torch

    q, k, v, _mask = inputs
    b, h, s, d = q.shape
    kvh, c, dv = k.shape[1], k.shape[2], v.shape[3]
    qr = q.transpose(1, 2).reshape(b * s, h, d).contiguous()
    kr = k.transpose(1, 2).reshape(b * c, kvh, d).contiguous()
    vr = v.transpose(1, 2).reshape(b * c, kvh, dv).contiguous()
    qo_indptr = torch.arange(b + 1, dtype=torch.int32, device=device) * s
    kv_indptr = torch.arange(b + 1, dtype=torch.int32, device=device) * c
    workspace = torch.zeros(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD")
    wrapper.plan(
        qo_indptr, kv_indptr, h, kvh, d, head_dim_vo=dv, causal=True, window_left=_window_left(shape),
        q_data_type=q.dtype, kv_data_type=k.dtype,
    )  # fmt: skip

    def run():
        return wrapper.run(qr, kr, vr).reshape(b, s, h, dv).transpose(1, 2)

    return run


def _flashinfer_decode(fi, shape, inputs, device):
    """One new token per request over a paged NHD cache (separate K and V pages of 16 tokens)."""
    import torch

    q, k, v, _mask = inputs
    b, h, _, d = q.shape
    kvh, c = k.shape[1], k.shape[2]
    pages = -(-c // _PAGE)
    k_cache = torch.zeros(b * pages, _PAGE, kvh, d, dtype=k.dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    for r in range(b):  # request r owns pages r*pages .. (r+1)*pages - 1; [kvh, c, d] -> [c, kvh, d]
        k_cache[r * pages : (r + 1) * pages].view(pages * _PAGE, kvh, d)[:c] = k[r].transpose(0, 1)
        v_cache[r * pages : (r + 1) * pages].view(pages * _PAGE, kvh, d)[:c] = v[r].transpose(0, 1)
    indptr = torch.arange(b + 1, dtype=torch.int32, device=device) * pages
    indices = torch.arange(b * pages, dtype=torch.int32, device=device)
    last = torch.full((b,), c - (pages - 1) * _PAGE, dtype=torch.int32, device=device)
    workspace = torch.zeros(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    wrapper.plan(
        indptr,
        indices,
        last,
        h,
        kvh,
        d,
        _PAGE,
        window_left=_window_left(shape),
        q_data_type=q.dtype,
        kv_data_type=k.dtype,
    )
    qd = q[:, :, 0, :].contiguous()  # [b, h, d]

    def run():
        return wrapper.run(qd, (k_cache, v_cache)).unsqueeze(2)  # [b, h, 1, d]

    return run


def _flashinfer_rmsnorm(fi, shape, inputs, device):
    from archsql.kernel_corpus.harness import RMS_EPS

    x, w = inputs
    return lambda: fi.norm.rmsnorm(x, w, eps=RMS_EPS)


def _same_head_dims(shape) -> str | None:
    v = shape.get("v_head_dim")
    if v is not None and v != shape.get("head_dim"):
        return "needs v_head_dim = head_dim"
    return None


def _decode_only_one_token(shape) -> str | None:
    if shape.get("q_len") != 1:
        return "decode kernel takes one new token per request"
    return _same_head_dims(shape)


_HALF = ("fp16", "bf16")

FLASHINFER = Provider(
    "flashinfer",
    "flashinfer",
    "flashinfer-python",
    (
        ProviderKernel(
            "attention", "flashinfer.BatchPrefillWithRaggedKVCacheWrapper", _HALF, _flashinfer_prefill, ("prefill",)
        ),
        ProviderKernel(
            "attention",
            "flashinfer.BatchDecodeWithPagedKVCacheWrapper",
            _HALF,
            _flashinfer_decode,
            ("decode",),
            _decode_only_one_token,
        ),
        ProviderKernel("rmsnorm", "flashinfer.norm.rmsnorm", _HALF, _flashinfer_rmsnorm),
    ),
    min_capability=(8, 0),
)


# -- flash-attn ------------------------------------------------------------------------------


def _flash_attn_prefill(fa, shape, inputs, device):
    q, k, v, _mask = inputs
    window = _window_left(shape)
    # flash-attn wants [b, s, h, d]; its causal mask is aligned to the bottom right
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    return lambda: fa.flash_attn_func(qt, kt, vt, causal=True, window_size=(window, 0)).transpose(1, 2)


def _flash_attn_decode(fa, shape, inputs, device):
    import torch

    q, k, v, _mask = inputs
    window = _window_left(shape)
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    seqlens = torch.full((q.shape[0],), k.shape[2], dtype=torch.int32, device=device)
    return lambda: fa.flash_attn_with_kvcache(
        qt, kt, vt, cache_seqlens=seqlens, causal=True, window_size=(window, 0)
    ).transpose(1, 2)


FLASH_ATTN = Provider(
    "flash-attn",
    "flash_attn",
    "flash-attn",
    (
        ProviderKernel("attention", "flash_attn.flash_attn_func", _HALF, _flash_attn_prefill, ("prefill",)),
        ProviderKernel(
            "attention",
            "flash_attn.flash_attn_with_kvcache",
            _HALF,
            _flash_attn_decode,
            ("decode",),
        ),
    ),
    min_capability=(8, 0),
)


# -- DeepGEMM --------------------------------------------------------------------------------


def _deep_gemm_prepare(dg, shape, inputs, device):
    """``D = A @ Bᵀ`` with A [m, k], B [n, k] (the reference layout).  FP8 operands carry
    unit block scales (per token × 128 channels for A, 128 × 128 blocks for B): the inputs
    already are the FP8 values the reference multiplies."""
    import torch

    x, w = inputs
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    if x.dtype == torch.bfloat16:
        return lambda: (dg.bf16_gemm_nt(x, w, out), out)[1]
    sfa = torch.ones(m, -(-k // 128), dtype=torch.float32, device=device)
    sfb = torch.ones(-(-n // 128), -(-k // 128), dtype=torch.float32, device=device)
    if hasattr(dg, "fp8_gemm_nt"):  # DeepGEMM >= 2.0
        return lambda: (dg.fp8_gemm_nt((x, sfa), (w, sfb), out), out)[1]
    sfa = dg.get_col_major_tma_aligned_tensor(sfa)  # 1.x: LHS scales TMA-aligned, column-major
    return lambda: (dg.gemm_fp8_fp8_bf16_nt((x, sfa), (w, sfb), out), out)[1]


def _deep_gemm_shape(shape) -> str | None:
    if shape.get("k") % 128 or shape.get("n") % 64:
        return "needs k a multiple of 128 and n of 64"
    return None


DEEP_GEMM = Provider(
    "deep-gemm",
    "deep_gemm",
    "deep-gemm",
    (
        ProviderKernel(
            "gemm", "deep_gemm.fp8_gemm_nt / bf16_gemm_nt", ("bf16", "fp8"), _deep_gemm_prepare, None, _deep_gemm_shape
        ),
    ),
    min_capability=(9, 0),
)


# -- the registry ----------------------------------------------------------------------------

_REGISTRY: dict[str, Provider] = {}


def _builtins() -> None:
    """Register PyTorch eager and the library providers (once; the eager kernels are read
    from the harness references, imported on first use)."""
    if "torch" not in _REGISTRY:
        _REGISTRY["torch"] = Provider("torch", "torch", None, _torch_kernels(), ("cpu", "cuda"), reference=True)
        for p in (FLASHINFER, FLASH_ATTN, DEEP_GEMM):
            _REGISTRY.setdefault(p.name, p)


def register(provider: Provider) -> Provider:
    """Add a provider (a library, or a test's fake); names are unique."""
    _builtins()
    if provider.name in _REGISTRY:
        raise CorpusError(f"a provider named {provider.name!r} is already registered")
    _REGISTRY[provider.name] = provider
    return provider


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def providers(names: list[str] | None = None) -> list[Provider]:
    """The registered providers (the reference first), or the ones ``names`` picks."""
    _builtins()
    chosen = list(_REGISTRY.values())
    if names:
        from archsql.errors import Issue, unknown_name

        unknown = [n for n in names if n not in _REGISTRY]
        if unknown:
            issues = []
            for n in unknown:
                message, hint = unknown_name("provider", n, _REGISTRY)
                issues.append(Issue(message, hint=hint))
            raise CorpusError("--provider names a provider that is not registered", issues)
        chosen = [p for p in chosen if p.name in names or p.reference]
    return sorted(chosen, key=lambda p: not p.reference)


__all__ = ["DEEP_GEMM", "FLASHINFER", "FLASH_ATTN", "Availability", "Provider", "ProviderKernel", "providers",
           "register", "unregister"]  # fmt: skip
