"""The registries a measurement row is checked against: op kinds, dtype names, phases, units.

An op kind is one small declarative record: its family (what the summary groups by), the
signature fields a row of that kind must carry, and its math contract in words.  The FLOP
and byte formulas of each kind are SQL macros (``archsql/kernel_corpus/views/macros``),
so ingest checks and views compute them in one place; a formula that needs an optional
field (the MLA / sparse geometry of a module row, say) is null for a row without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

PHASES = ("prefill", "decode", "verify")

# Time columns a CSV may carry, and their factor to microseconds.
TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}

CANONICAL_DTYPES = ("fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")


@dataclass(frozen=True)
class OpKind:
    name: str
    family: str
    required: tuple[str, ...]
    contract: str
    # the fields (besides gpu and op_kind) on which a measurement must agree with a
    # deployment's op to stand for it; default: required.  This is the one list: written to
    # kernel_op_kinds.signature, from which measured_vs_sol builds both sides' join key by
    # field name (a new field is a column of the corpus schema and of kernel_signatures)
    signature: tuple[str, ...] = ()

    @property
    def match(self) -> tuple[str, ...]:
        return self.signature or self.required


_ATTN_MODULE = ("batch", "q_len", "kv_len", "heads")
_LINEAR_ATTN = ("batch", "q_len", "tokens", "heads", "head_dim")
_COLLECTIVE = ("message_bytes", "group_size")
_A2A = ("tokens", "hidden", "topk", "experts", "ep")
_ATTN_SHAPE = ("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim", "v_head_dim", "window_size")
_ATTN_SIGNATURE = ("phase", "dtype", "kv_dtype", *_ATTN_SHAPE)

OP_KINDS: tuple[OpKind, ...] = (
    OpKind(
        "gemm",
        "gemm",
        ("m", "n", "k", "dtype"),
        "y[m, n] = x[m, k] · W[n, k]ᵀ",
        ("dtype", "weight_dtype", "m", "n", "k"),
    ),
    OpKind(
        "grouped_gemm",
        "moe",
        ("tokens", "experts", "topk", "n", "k", "dtype"),
        "each token times W_e[n, k]ᵀ of each of its top-k experts (one MoE expert projection)",
        ("dtype", "weight_dtype", "tokens", "experts", "topk", "n", "k", "ep", "routing"),
    ),
    OpKind(
        "moe",
        "moe",
        ("tokens", "hidden", "inter", "topk", "experts", "dtype"),
        "routed experts of this device: up (+ gate) and down projections of the tokens routed to them",
        # the experts a device holds and its share of each follow the MoE layout: a row of
        # another expert-parallel degree (aiconfigurator's moe_ep_size) is another kernel
        ("tokens", "hidden", "inter", "topk", "experts", "dtype", "tp", "ep"),
    ),
    OpKind(
        "moe_module",
        "moe",
        ("tokens", "hidden", "inter", "topk", "experts"),
        "fused MoE block: dispatch, experts and combine in one kernel",
    ),
    OpKind("mlp", "mlp", ("tokens", "hidden", "inter", "dtype"), "dense FFN: up (+ gate) and down projections"),
    OpKind(
        "attention",
        "attention",
        ("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim", "dtype"),
        "causal softmax(q·kᵀ/√d)·v: q_len new queries after kv_len - q_len cached tokens, each seeing "
        "at most `window_size` keys",
        _ATTN_SIGNATURE,
    ),
    OpKind(
        "encoder_attention",
        "attention",
        ("batch", "q_len", "heads", "head_dim", "dtype"),
        "bidirectional softmax attention over q_len tokens",
        ("dtype", "batch", "q_len", "heads", "head_dim", "v_head_dim"),
    ),
    OpKind(
        "mla",
        "mla",
        ("batch", "q_len", "kv_len", "heads", "kv_lora_rank", "rope_dim", "head_dim", "v_head_dim"),
        "multi-head latent attention core; decode runs absorbed (q·latent over kv_lora_rank + rope_dim)",
    ),
    OpKind(
        "mla_bmm",
        "mla",
        ("tokens", "heads", "kv_lora_rank", "head_dim"),
        "MLA absorbed per-head projection (latent ↔ head_dim), a batched GEMM",
    ),
    OpKind(
        "mla_module",
        "mla",
        _ATTN_MODULE,
        "the whole MLA attention block of `model` (projections included); geometry in kv_lora_rank, rope_dim, "
        "head_dim (non-rotary), v_head_dim, hidden",
    ),
    OpKind(
        "dsa_module",
        "sparse_attention",
        _ATTN_MODULE,
        "DeepSeek sparse attention block of `model`: MLA whose queries each attend index_topk selected keys",
    ),
    OpKind(
        "dsa_attn",
        "sparse_attention",
        _ATTN_MODULE,
        "sparse absorbed MLA over the index_topk selected keys (q·latent over kv_lora_rank + rope_dim)",
    ),
    OpKind(
        "msa_module",
        "sparse_attention",
        _ATTN_MODULE,
        "MiniMax sparse attention block of `model`: GQA whose queries attend index_topk selected keys",
    ),
    OpKind(
        "dsv4_csa_module",
        "sparse_attention",
        _ATTN_MODULE,
        "DeepSeek-V4 compressed sparse attention block: a window_size window plus index_topk of the "
        "compress_ratio-compressed entries",
    ),
    OpKind(
        "dsv4_hca_module",
        "sparse_attention",
        _ATTN_MODULE,
        "DeepSeek-V4 heavily compressed attention block: a window_size window plus every compressed entry",
    ),
    OpKind("dsv4_hca_attn", "sparse_attention", _ATTN_MODULE, "DeepSeek-V4 compressed attention core (FlashMLA)"),
    OpKind(
        "mqa_logits",
        "sparse_attention",
        _ATTN_MODULE,
        "indexer logits of sparse attention: ReLU(q·k) over `heads` index heads of `head_dim`, weighted, per "
        "(query, compressed key) pair",
    ),
    OpKind("sparse_topk", "sparse_attention", _ATTN_MODULE, "top-index_topk key selection over the indexer logits"),
    OpKind(
        "gdn",
        "linear_attention",
        _LINEAR_ATTN,
        "gated DeltaNet rule (chunked or recurrent): `heads` value heads with a v_head_dim × head_dim state, "
        "kv_heads query/key heads; kv_dtype is the state's dtype",
    ),
    OpKind(
        "kda",
        "linear_attention",
        _LINEAR_ATTN,
        "Kimi delta attention rule (a per-key-channel decay gate), state as for gdn",
    ),
    OpKind(
        "mamba2",
        "ssm",
        ("batch", "q_len", "tokens", "heads", "head_dim", "state_dim"),
        "Mamba2 SSD scan: `heads` heads with a head_dim × state_dim state, ssm_groups B/C groups",
    ),
    OpKind(
        "causal_conv1d",
        "conv",
        ("batch", "tokens", "hidden", "conv_kernel"),
        "depthwise causal conv of width conv_kernel over `hidden` channels (the conv of a GDN / KDA / Mamba2 "
        "mixer), continuing a conv_kernel − 1 step state per request",
    ),
    OpKind("mhc", "mhc", ("tokens", "hidden"), "manifold hyper-connection pre/post mapping"),
    OpKind("rmsnorm", "norm", ("tokens", "hidden", "dtype"), "y = x / √(mean(x²) + ε) · w over `hidden`"),
    OpKind("quantize", "quantize", ("m", "k", "dtype"), "activation quantization to `dtype` (scale / scaled copy)"),
    OpKind(
        "all_reduce",
        "comm",
        _COLLECTIVE,
        "sum over group_size ranks, result on every rank",
        ("dtype", *_COLLECTIVE, "nodes"),
    ),
    OpKind("all_gather", "comm", _COLLECTIVE, "concatenation of every rank's shard on every rank"),
    OpKind("reduce_scatter", "comm", _COLLECTIVE, "sum over ranks, each rank keeps one shard"),
    OpKind("all_to_all", "comm", _COLLECTIVE, "every rank sends one shard to every other rank"),
    OpKind("moe_dispatch", "comm", _A2A, "MoE all-to-all: send each token to the ranks of its experts"),
    OpKind("moe_combine", "comm", _A2A, "MoE all-to-all: bring expert outputs back to the token's rank"),
    OpKind("moe_a2a_prepare", "comm", _A2A, "MoE all-to-all metadata exchange before dispatch"),
)
OP_KIND = {k.name: k for k in OP_KINDS}
assert len(OP_KIND) == len(OP_KINDS), "op kind names collide"


@dataclass(frozen=True)
class DtypeName:
    """How a source spells a dtype or quantization mode: the compute dtype, the stored
    weight dtype when it differs, and the scheme name kept in ``quant``."""

    dtype: str | None
    weight_dtype: str | None = None
    quant: str | None = None


DTYPE_NAMES: dict[str, DtypeName] = {
    **{name: DtypeName(name) for name in CANONICAL_DTYPES},
    "float32": DtypeName("fp32"),
    "float": DtypeName("fp32"),
    "bfloat16": DtypeName("bf16"),
    "float16": DtypeName("fp16"),
    "half": DtypeName("fp16"),
    "fp8_e4m3": DtypeName("fp8"),
    "float8_e4m3fn": DtypeName("fp8"),
    "fp8_block": DtypeName("fp8", None, "fp8_block"),  # 128x128-block-scaled FP8
    "nvfp4": DtypeName("fp4", None, "nvfp4"),
    "int8_wo": DtypeName("bf16", "int8", "int8_wo"),  # weight-only INT8, BF16 math
    "int4_wo": DtypeName("bf16", "int4", "int4_wo"),
    "sq": DtypeName("int8", None, "smoothquant"),  # W8A8 INT8
    "w4a8_mxfp4_mxfp8": DtypeName("fp8", "fp4", "w4a8_mxfp4_mxfp8"),
    "w4a16_mxfp4": DtypeName("bf16", "fp4", "w4a16_mxfp4"),
    "w4afp8": DtypeName("fp8", "int4", "w4afp8"),
    "default": DtypeName(None, None, "default"),  # the library's own choice, not stated
}


def op_kinds_table() -> pa.Table:
    """The ``kernel_op_kinds`` table: op kind, family, required signature fields, contract,
    and the fields a measurement is matched on (``OpKind.match``)."""
    return pa.table(
        {
            "op_kind": [k.name for k in OP_KINDS],
            "family": [k.family for k in OP_KINDS],
            "required": pa.array([list(k.required) for k in OP_KINDS], pa.list_(pa.string())),
            "contract": [k.contract for k in OP_KINDS],
            "signature": pa.array([list(k.match) for k in OP_KINDS], pa.list_(pa.string())),
        }
    )


def dtype_names_table() -> pa.Table:
    """``kernel_dtype_names``: every accepted spelling and what it means."""
    names = sorted(DTYPE_NAMES)
    return pa.table(
        {
            "name": names,
            "dtype": pa.array([DTYPE_NAMES[n].dtype for n in names], pa.string()),
            "weight_dtype": pa.array([DTYPE_NAMES[n].weight_dtype for n in names], pa.string()),
            "quant": pa.array([DTYPE_NAMES[n].quant for n in names], pa.string()),
        }
    )
