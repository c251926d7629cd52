"""Import NVIDIA's aiconfigurator-core database (Apache-2.0 wheel on PyPI) into the corpus.

The wheel ships ``aiconfigurator_core/systems/data/<system>/<op family>/<framework>/
<version>/<table>.parquet``: kernel times collected by NVIDIA on each system (GPU) through
each serving framework.  Every table is mapped here, declaratively (:data:`TABLES`), onto
the corpus columns:

* provenance: ``source`` = ``aiconfigurator-core <package version>``, ``source_key`` =
  ``aiconfigurator-core:<path under systems/data>``; ``library`` / ``library_version`` =
  the framework and version of the directory, ``library_version_reported`` = the file's
  own ``version`` column (the two can differ: a table collected under another version and
  filed under this one); ``device_name`` = the file's ``device``; ``gpu`` = the system's
  row of the GPU table (:data:`SYSTEM_GPUS`);
* units: ``latency`` is milliseconds in every table except ``moe_a2a_perf`` and the DeepEP
  tables (``*_us`` columns), which are microseconds (aiconfigurator-core's loaders,
  ``perf_database/moe_a2a.rs``); everything is stored in microseconds.  Collective message
  sizes are element counts (``collect_nccl.py``: ``size // bytes_per_element``), stored as
  bytes;
* shapes per device: attention-family tables sweep the rank-local head count
  (``num_heads``; aiconfigurator's loaders key on it, ``tp_size`` is provenance), kept as
  ``heads`` with ``tp`` = tp_size.  ``kv_len`` = ``isl + step``
  (``step`` is the cached history; a decode row has isl = 1).  MLA kernels use the
  DeepSeek geometry the collectors assert (kv_lora_rank 512, rope 64, qk_nope 128, v 128);
* a DeepEP row gives two measurements, dispatch and combine (same ``source_row``);
* a GDN / KDA / Mamba2 row times one kernel of the mixer: the causal conv kernels
  (``kernel_source`` ``causal_conv1d…``) become op kind ``causal_conv1d`` with ``hidden`` =
  the conv channels (2·k heads·k dim + v heads·v dim; Mamba2: heads·head_dim +
  2·groups·d_state — the collectors' ``conv_channels`` / ``conv_dim``), the others the
  mixer's rule (``gdn``, ``kda``, ``mamba2``); the collectors run them in BF16;
* model-specific modules and sparse-attention kernels name their ``model``; the geometry
  their work formulas need (MLA ranks, sparse top-k, windows, indexer heads) is read from
  that model's config in the same package (``aiconfigurator_core/model_configs/
  <org>--<name>_config.json``), declared per table (:attr:`TableMap.config`).

Knobs outside the signature (architecture, backend, sms, score_mode, ...) go to ``attrs``.
Rows then pass the common validation (:mod:`archsql.kernel_corpus.ingest`): bad rows are
rejected with reasons (a zero time, an implied throughput above the GPU's peak), a source
file already imported is skipped.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import tempfile
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

from archsql.errors import CorpusError, Issue, unknown_name
from archsql.kernel_corpus.ingest import ISSUE_TYPE, CorpusWriter, IngestReport, Source, file_sha256
from archsql.kernel_corpus.schema import CORPUS_SCHEMA, sql_type

ORIGIN = "aiconfigurator-core"
DATA = "aiconfigurator_core/systems/data"
MODEL_CONFIGS = "aiconfigurator_core/model_configs"

# aiconfigurator system -> the gpus.gpu it runs (its systems/<system>.yaml describes the GPU)
SYSTEM_GPUS = {
    "a100_sxm": "A100 SXM 80GB",
    "b200_sxm": "B200 (HGX/DGX B200)",
    "b300_sxm": "B300 (HGX B300)",
    "gb200": "GB200 (per GPU in NVL72)",
    "gb300": "GB300 (per GPU in NVL72)",
    "h100_sxm": "H100 SXM",
    "h200_sxm": "H200 SXM",
    "l40s": "L40S",
    "rtx_pro_6000_server": "RTX PRO 6000 Blackwell Server",
    "b60": "Arc Pro B60",
}

_PHASE = "case {c} when 'context' then 'prefill' when 'generation' then 'decode' else {c} end"
_ATTN = {"batch": "batch_size", "q_len": "isl", "kv_len": "isl + step"}
_MLA_GEOMETRY = {"kv_lora_rank": "512", "rope_dim": "64", "head_dim": "128", "v_head_dim": "128"}
_PER_DEVICE_HEADS = {"heads": "num_heads", "tp": "tp_size"}  # rank-local heads; tp is provenance
_MODULE = {
    **_ATTN,
    **_PER_DEVICE_HEADS,
    "model": "model",
    "dtype": "mla_dtype",
    "kv_dtype": "kv_cache_dtype",
    "weight_dtype": "gemm_type",
}
_LINEAR_ATTN = {
    "phase": _PHASE.format(c="phase"),
    "batch": "batch_size",
    "q_len": "seq_len",
    "tokens": "num_tokens",
    "conv_kernel": "d_conv",
    "model": "model_name",
    "dtype": "'bfloat16'",  # every GDN / KDA / Mamba2 collector runs its kernels in torch.bfloat16
}
_CONV = "kernel_source like 'causal_conv1d%'"  # the mixer's causal conv kernel (fn, update, fn_qkv3)
# Conv channels per mixer table, as each collector sizes its conv input: q, k and v
# (sglang/ and vllm/collect_gdn.py, collect_kda.py: 2·key_dim + value_dim = 3·proj_size),
# except TRT-LLM's GDN collector, which convolves the key channels only
# (trtllm/collect_gdn.py: conv_channels = num_k_heads * head_k_dim); Mamba2 convolves x, B, C
# (trtllm/collect_mamba2.py: conv_dim = d_inner + 2 * n_groups * d_state).
_DELTA_CONV = (
    "case when lower(framework) = 'trtllm' then num_k_heads * head_k_dim "
    "else 2 * num_k_heads * head_k_dim + num_v_heads * head_v_dim end"
)
_MAMBA2_CONV = "nheads * head_dim + 2 * n_groups * d_state"


def _mixer(kind: str, channels: str) -> dict[str, str]:
    return {
        **_LINEAR_ATTN,
        "op_kind": f"case when {_CONV} then 'causal_conv1d' else '{kind}' end",
        "hidden": f"case when {_CONV} then {channels} else d_model end",
    }


# Model geometry from the package's model_configs, per family of table.
_MLA_CONFIG = {
    "hidden": "hidden_size",
    "kv_lora_rank": "kv_lora_rank",
    "rope_dim": "qk_rope_head_dim",
    "head_dim": "qk_nope_head_dim",
    "v_head_dim": "v_head_dim",
}
_DSA_CONFIG = {**_MLA_CONFIG, "index_topk": "index_topk"}
_MSA_CONFIG = {
    "hidden": "hidden_size",
    "head_dim": "head_dim",
    "v_head_dim": "head_dim",
    "index_topk": "sparse_topk_tokens",
}
_DSV4_CONFIG = {
    "hidden": "hidden_size",
    "head_dim": "head_dim",  # one 512-wide entry is both key and value
    "v_head_dim": "head_dim",
    "window_size": "sliding_window",
    "index_topk": "index_topk",
}
# indexer kernels: the row's num_heads is the attention's (kept in attrs); the kernel runs the index heads
_INDEXER_CONFIG = {"heads": "index_n_heads", "head_dim": "index_head_dim", "index_topk": "index_topk"}
_MOE = {
    "dtype": "moe_dtype",
    "tokens": "num_tokens",
    "hidden": "hidden_size",
    "inter": "inter_size",
    "topk": "topk",
    "experts": "num_experts",
    "tp": "moe_tp_size",
    "ep": "moe_ep_size",
    "routing": "distribution",
    "gated": "kernel_source not like '%nongated%'",
    "power_w": "power",
    "power_limit_w": "power_limit",
}
_COLLECTIVE_BYTES = "message_size * case {c} when 'half' then 2 when 'bfloat16' then 2 when 'int8' then 1 end"


@dataclass(frozen=True)
class TableMap:
    """How one aiconfigurator table becomes corpus rows: corpus column -> SQL expression
    over the table's columns (an expression naming a column the file lacks is null);
    ``config``: corpus column -> a key of the row's model config (:data:`CONFIG_KEYS`),
    which takes precedence over ``columns``."""

    columns: dict[str, str]
    unit: str = "ms"  # of latency
    latency: str = "latency"
    attrs: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)


def _deepep(kind: str, latency: str, attrs: tuple[str, ...]) -> TableMap:
    return TableMap(
        {
            "op_kind": f"'{kind}'",
            "op_name": f"op_name || '_{kind.removeprefix('moe_')}'",
            "tokens": "num_token",
            "hidden": "hidden_size",
            "topk": "num_topk",
            "experts": "num_experts",
            "nodes": "node_num",
            "ep": "node_num * 8",  # the DeepEP tables were collected on 8-GPU nodes (aiconfigurator moe_a2a.rs)
        },
        unit="us",
        latency=latency,
        attrs=attrs,
    )


TABLES: dict[str, tuple[TableMap, ...]] = {
    "gemm_perf": (TableMap({"op_kind": "'gemm'", "dtype": "gemm_dtype", "m": "m", "n": "n", "k": "k"}),),
    "context_attention_perf": (
        TableMap(
            {
                "op_kind": "'attention'",
                "phase": "'prefill'",
                **_ATTN,
                "heads": "num_heads",
                "kv_heads": "num_key_value_heads",
                "head_dim": "head_dim",
                "window_size": "window_size",
                "dtype": "attn_dtype",
                "kv_dtype": "kv_cache_dtype",
                "power_w": "power",
                "power_limit_w": "power_limit",
            },
            attrs=("beam_width",),
        ),
    ),
    "encoder_attention_perf": (
        TableMap(
            {
                "op_kind": "'encoder_attention'",
                "phase": "'prefill'",
                "batch": "batch_size",
                "q_len": "isl",
                "kv_len": "isl",
                "heads": "num_heads",
                "kv_heads": "num_heads",
                "head_dim": "head_dim",
                "dtype": "attn_dtype",
            }
        ),
    ),
    "context_mla_perf": (
        TableMap(
            {
                "op_kind": "'mla'",
                "phase": "'prefill'",
                **_ATTN,
                **_PER_DEVICE_HEADS,
                **_MLA_GEOMETRY,
                "dtype": "mla_dtype",
                "kv_dtype": "kv_cache_dtype",
            }
        ),
    ),
    "mla_bmm_perf": (
        TableMap(
            {
                "op_kind": "'mla_bmm'",
                "dtype": "bmm_dtype",
                "tokens": "num_tokens",
                "heads": "num_heads",
                "kv_lora_rank": "512",
                "head_dim": "128",
            }
        ),
    ),
    "mla_context_module_perf": (
        TableMap(
            {"op_kind": "'mla_module'", "phase": "'prefill'", **_MODULE}, attrs=("architecture",), config=_MLA_CONFIG
        ),
    ),
    "wideep_context_mla_perf": (
        TableMap(
            {"op_kind": "'mla_module'", "phase": "'prefill'", **_MODULE}, attrs=("architecture",), config=_MLA_CONFIG
        ),
    ),
    "dsa_context_module_perf": (
        TableMap(
            {"op_kind": "'dsa_module'", "phase": "'prefill'", **_MODULE}, attrs=("architecture",), config=_DSA_CONFIG
        ),
    ),
    "msa_context_module_perf": (
        TableMap(
            {"op_kind": "'msa_module'", "phase": "'prefill'", **_MODULE}, attrs=("architecture",), config=_MSA_CONFIG
        ),
    ),
    "dsv4_csa_context_module_perf": (
        TableMap(
            {"op_kind": "'dsv4_csa_module'", "phase": "'prefill'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture",),
            config=_DSV4_CONFIG,
        ),
    ),
    "dsv4_hca_context_module_perf": (
        TableMap(
            {"op_kind": "'dsv4_hca_module'", "phase": "'prefill'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture",),
            config=_DSV4_CONFIG,
        ),
    ),
    "dsv4_hca_attn_module_perf": (
        TableMap(
            {
                "op_kind": "'dsv4_hca_attn'",
                **_MODULE,
                "heads": "local_num_heads",
                "compress_ratio": "compress_ratio",
            },
            attrs=("architecture", "num_heads"),
            config=_DSV4_CONFIG,
        ),
    ),
    "dsv4_csa_topk_calib_perf": (
        TableMap(
            {"op_kind": "'sparse_topk'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture", "score_mode", "num_heads"),
            config=_INDEXER_CONFIG,
        ),
    ),
    "dsv4_paged_mqa_logits_module_perf": (
        TableMap(
            {"op_kind": "'mqa_logits'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture", "num_heads", "local_num_heads"),
            config=_INDEXER_CONFIG,
        ),
    ),
    "glm5_dsa_attn_module_perf": (
        TableMap(
            {"op_kind": "'dsa_attn'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture",),
            config=_DSA_CONFIG,
        ),
    ),
    "glm5_mqa_logits_module_perf": (
        TableMap(
            {"op_kind": "'mqa_logits'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture", "num_heads"),
            config=_INDEXER_CONFIG,
        ),
    ),
    "glm5_topk_module_perf": (
        TableMap(
            {"op_kind": "'sparse_topk'", **_MODULE, "compress_ratio": "compress_ratio"},
            attrs=("architecture", "score_mode", "num_heads"),
            config=_INDEXER_CONFIG,
        ),
    ),
    "gdn_perf": (
        TableMap(
            {
                **_mixer("gdn", _DELTA_CONV),
                "heads": "num_v_heads",
                "kv_heads": "num_k_heads",
                "head_dim": "head_k_dim",
                "v_head_dim": "head_v_dim",
            },
            attrs=("d_model",),
        ),
    ),
    "kda_perf": (
        TableMap(
            {
                **_mixer("kda", _DELTA_CONV),
                "heads": "num_v_heads",
                "kv_heads": "num_k_heads",
                "head_dim": "head_k_dim",
                "v_head_dim": "head_v_dim",
            },
            attrs=("d_model",),
        ),
    ),
    "mamba2_perf": (
        TableMap(
            {
                **_mixer("mamba2", _MAMBA2_CONV),
                "heads": "nheads",
                "head_dim": "head_dim",
                "state_dim": "d_state",
                "ssm_groups": "n_groups",
                "chunk": "chunk_size",
            },
            attrs=("d_model",),
        ),
    ),
    "mhc_module_perf": (
        TableMap(
            # the collectors build the module in torch.bfloat16
            {"op_kind": "'mhc'", "tokens": "num_tokens", "hidden": "hidden_size", "dtype": "'bfloat16'"},
            attrs=("architecture", "num_sites", "hc_mult", "sinkhorn_iters"),
        ),
    ),
    "moe_perf": (TableMap({"op_kind": "'moe'", **_MOE}),),
    "wideep_context_moe_perf": (TableMap({"op_kind": "'moe'", "phase": "'prefill'", **_MOE}),),
    "wideep_generation_moe_perf": (TableMap({"op_kind": "'moe'", "phase": "'decode'", **_MOE}),),
    "wideep_moe_perf": (
        TableMap(
            {"op_kind": "'moe'", **_MOE},
            attrs=("moe_kernel", "dp_num_tokens", "rank0_num_tokens", "num_slots", "simulation_mode"),
        ),
    ),
    "dsv4_megamoe_module_perf": (
        TableMap(
            {
                "op_kind": "'moe_module'",
                **_MOE,
                # tokens before routing, as in the other MoE tables: num_tokens is per rank
                "tokens": "global_num_tokens",
                "phase": _PHASE.format(c="phase"),
                "shared_experts": "num_fused_shared_experts",
            },
            attrs=(
                "num_tokens",
                "kernel_dtype",
                "global_num_tokens",
                "source_policy",
                "pre_dispatch",
                "num_max_tokens_per_rank",
                "effective_num_max_tokens_per_rank",
                "routed_scaling_factor",
                "includes_routed_scale",
                "includes_gate_topk",
                "buffer_policy",
                "includes_buffer_init",
                "used_cuda_graph",
            ),
        ),
    ),
    "wideep_context_mlp_perf": (
        TableMap(
            {
                "op_kind": "'mlp'",
                "phase": "'prefill'",
                "dtype": "quant_type",
                "tokens": "num_token",
                "hidden": "hidden_size",
                "inter": "intermediate_size",
                "gated": "true",  # DeepSeek-V3 dense / shared-expert MLP (kernel_source deepseek_v3): SwiGLU
            },
            latency="avg_ms",
        ),
    ),
    "nccl_perf": (
        TableMap(
            {
                "op_kind": "case op_name when 'alltoall' then 'all_to_all' else op_name end",
                "dtype": "nccl_dtype",
                "group_size": "num_gpus",
                "message_bytes": _COLLECTIVE_BYTES.format(c="nccl_dtype"),
            }
        ),
    ),
    "custom_allreduce_perf": (
        TableMap(
            {
                "op_kind": "'all_reduce'",
                "dtype": "allreduce_dtype",
                "group_size": "num_gpus",
                "message_bytes": _COLLECTIVE_BYTES.format(c="allreduce_dtype"),
            },
            attrs=("implementation", "backend"),
        ),
    ),
    "moe_a2a_perf": (
        TableMap(
            {
                "op_kind": "'moe_' || phase",
                "dtype": "comm_dtype",
                "tokens": "num_tokens",
                "hidden": "hidden_size",
                "topk": "topk",
                "experts": "num_experts",
                "ep": "ep_size",
                "nodes": "node_num",
            },
            unit="us",  # microseconds (collector convention; aiconfigurator moe_a2a.rs divides by 1000)
            attrs=("comm_backend", "sms", "transmit_us", "notify_us"),
        ),
    ),
    "wideep_deepep_ll_perf": (
        _deepep("moe_dispatch", "dispatch_avg_t_us", ("dispatch_bandwidth_gbps",)),
        _deepep("moe_combine", "combine_avg_t_us", ("combine_bandwidth_gbps",)),
    ),
    "wideep_deepep_normal_perf": (
        _deepep("moe_dispatch", "dispatch_transmit_us + dispatch_notify_us", ("dispatch_sms",)),
        _deepep("moe_combine", "combine_transmit_us + combine_notify_us", ("combine_sms",)),
    ),
    "trtllm_alltoall_perf": (
        TableMap(
            {
                "op_kind": "case op_name when 'alltoall_prepare' then 'moe_a2a_prepare' "
                "when 'alltoall_dispatch' then 'moe_dispatch' else 'moe_combine' end",
                # the low-precision combine sends FP4 (aiconfigurator moe_a2a.rs)
                "dtype": "case op_name when 'alltoall_combine_low_precision' then 'fp4' else moe_dtype end",
                "tokens": "num_tokens",
                "hidden": "hidden_size",
                "topk": "topk",
                "experts": "num_experts",
                "ep": "moe_ep_size",
                "routing": "distribution",
            }
        ),
    ),
    "computescale_perf": (TableMap({"op_kind": "'quantize'", "dtype": "quant_dtype", "m": "m", "k": "k"}),),
}
# Same layout, other phase / name.
TABLES["generation_attention_perf"] = (
    TableMap({**TABLES["context_attention_perf"][0].columns, "phase": "'decode'"}, attrs=("beam_width",)),
)
TABLES["generation_mla_perf"] = (TableMap({**TABLES["context_mla_perf"][0].columns, "phase": "'decode'"}),)
for _table, _kind in (
    ("mla_generation_module_perf", "mla_module"),
    ("dsa_generation_module_perf", "dsa_module"),
    ("msa_generation_module_perf", "msa_module"),
    ("dsv4_csa_generation_module_perf", "dsv4_csa_module"),
    ("dsv4_hca_generation_module_perf", "dsv4_hca_module"),
):
    _context = TABLES[_table.replace("generation", "context")][0]
    TABLES[_table] = (
        TableMap({**_context.columns, "phase": "'decode'"}, attrs=_context.attrs, config=_context.config),
    )
# the wide-EP decode MLA table states the context length as isl (step is 0): one new token
TABLES["wideep_generation_mla_perf"] = (
    TableMap(
        {**TABLES["wideep_context_mla_perf"][0].columns, "phase": "'decode'", "q_len": "1", "kv_len": "isl + step"},
        attrs=("architecture",),
        config=_MLA_CONFIG,
    ),
)
TABLES["wideep_generation_mlp_perf"] = (
    TableMap({**TABLES["wideep_context_mlp_perf"][0].columns, "phase": "'decode'"}, latency="avg_ms"),
)
TABLES["oneccl_perf"] = TABLES["nccl_perf"]
TABLES["scale_matrix_perf"] = TABLES["computescale_perf"]

_UNIT_US = {"ms": 1000.0, "us": 1.0}
BATCH_ROWS = 2_000_000


@dataclass(frozen=True)
class DataFile:
    path: Path  # on disk
    rel: str  # under systems/data
    system: str
    family: str
    framework: str
    version: str
    table: str


def locate(location: str | Path | None = None) -> tuple[Path, str, tempfile.TemporaryDirectory | None]:
    """(systems/data folder, package version, temp dir to clean up) from a wheel file, a
    folder (an unpacked wheel, a site-packages, or systems/data itself), or — by default —
    the installed ``aiconfigurator-core`` package (``pip install archsql[aiconfigurator]``)."""
    if location is None:
        spec = importlib.util.find_spec("aiconfigurator_core")
        if spec is None or not spec.submodule_search_locations:
            raise CorpusError(
                "aiconfigurator-core is not installed",
                [
                    Issue(
                        "install it or point --from at its wheel",
                        hint="pip install 'archsql[aiconfigurator]'  (or: pip download aiconfigurator-core --no-deps)",
                    )
                ],
            )
        package = Path(next(iter(spec.submodule_search_locations)))
        return package / "systems" / "data", importlib.metadata.version("aiconfigurator-core"), None
    path = Path(location)
    if path.is_file() and path.suffix == ".whl":
        match = re.match(r"aiconfigurator_core-([^-]+)-", path.name)
        if match is None:
            raise CorpusError(issues=[Issue("not an aiconfigurator-core wheel", file=str(path))])
        tmp = tempfile.TemporaryDirectory(prefix="archsql-aic-")
        try:
            with zipfile.ZipFile(path) as whl:
                members = [
                    m
                    for m in whl.namelist()
                    if (m.startswith(DATA + "/") and m.endswith(".parquet"))
                    or (m.startswith(MODEL_CONFIGS + "/") and m.endswith(".json"))
                ]
                whl.extractall(tmp.name, members)
        except (zipfile.BadZipFile, OSError) as exc:
            tmp.cleanup()
            raise CorpusError(issues=[Issue(f"cannot read the wheel: {exc}", file=str(path))]) from None
        return Path(tmp.name) / DATA, match.group(1), tmp
    if path.is_dir():
        for candidate in (path, path / "systems" / "data", path / DATA):
            if candidate.name == "data" and candidate.is_dir() and any(candidate.glob("*/*/*/*/*.parquet")):
                return candidate, _version_near(candidate), None
        raise CorpusError(issues=[Issue("no aiconfigurator systems/data folder here", file=str(path))])
    raise CorpusError(issues=[Issue("no such file or folder", file=str(path))])


# Model geometry the work formulas use, read from a model config (``text_config`` first,
# as multimodal configs nest the language model there): column -> how to read it.
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size",),
    "head_dim": ("head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "kv_lora_rank": ("kv_lora_rank",),
    "index_topk": ("index_topk",),
    "index_n_heads": ("index_n_heads",),
    "index_head_dim": ("index_head_dim",),
    "sliding_window": ("sliding_window",),
    # block-sparse attention: tokens a query's top-k blocks cover
    "sparse_topk_tokens": ("sparse_attention_config.sparse_topk_blocks", "sparse_attention_config.sparse_block_size"),
}


def model_configs(data: Path) -> pa.Table:
    """One row per model config shipped beside ``data`` (``model_configs/<org>--<name>_config.json``
    next to ``systems/``): ``model`` (``org/name``, as the tables' ``model`` column names it)
    and the :data:`CONFIG_KEYS` (a product of several keys for a multi-key entry; null when
    a key is absent or not an integer)."""
    folder = data.parent.parent / "model_configs"
    rows = []
    for path in sorted(folder.glob("*_config.json")) if folder.is_dir() else ():
        if path.name.endswith("_hf_quant_config.json"):
            continue
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a config: its models keep null geometry (their formulas are null)
        if not isinstance(config, dict):
            continue
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
        row = {"model": path.name.removesuffix("_config.json").replace("--", "/", 1)}
        for column, keys in CONFIG_KEYS.items():
            row[column] = _config_product(text, keys)
        rows.append(row)
    schema = pa.schema([("model", pa.string())] + [(c, pa.int64()) for c in CONFIG_KEYS])
    return pa.Table.from_pylist(rows, schema=schema)


def _config_product(config: dict, keys: tuple[str, ...]) -> int | None:
    out = 1
    for key in keys:
        value = config
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        out *= value
    return out


def data_files(data: Path, systems: list[str] | None = None) -> list[DataFile]:
    found = []
    for path in sorted(data.glob("*/*/*/*/*.parquet")):
        rel = path.relative_to(data)
        system, family, framework, version, _ = rel.parts
        found.append(DataFile(path, rel.as_posix(), system, family, framework, version, path.stem))
    if systems:
        known = {f.system for f in found}
        bad = [s for s in systems if s not in known]
        if bad:
            issues = []
            for s in bad:
                message, hint = unknown_name("system", s, known)
                issues.append(Issue(message, hint=hint))
            raise CorpusError(issues=issues)
        found = [f for f in found if f.system in systems]
    return found


def import_aiconfigurator(
    db: str | Path,
    *,
    location: str | Path | None = None,
    systems: list[str] | None = None,
    rejects: str | Path | None = None,
) -> IngestReport:
    """Import every table of the aiconfigurator-core database (or of ``systems``)."""
    data, version, tmp = locate(location)
    try:
        files = data_files(data, systems)
        unmapped = sorted({f.table for f in files} - set(TABLES))
        name = f"{ORIGIN} {version}"
        environment = {"aiconfigurator-core": version}
        sources = {
            f.rel: Source(
                key=f"{ORIGIN}:{f.rel}",
                name=name,
                content_sha256=file_sha256(f.path),
                origin=ORIGIN,
                location=f"{ORIGIN} {version}:systems/data/{f.rel}",
                environment=environment,
            )
            for f in files
            if f.table in TABLES
        }
        with CorpusWriter(db, rejects) as writer:
            writer.con.register("__archsql_model_configs", model_configs(data))
            writer.con.execute("create or replace temp table __model_configs as select * from __archsql_model_configs")
            writer.con.unregister("__archsql_model_configs")
            fresh = {s.hash for s in writer.new_sources(sources.values())}
            groups: dict[str, list[DataFile]] = defaultdict(list)
            for f in files:
                if f.table in TABLES and sources[f.rel].hash in fresh:
                    groups[f.table].append(f)
            for table, group in sorted(groups.items()):
                for chunk in _chunks(group):
                    writer.ingest([sources[f.rel] for f in chunk], _stage(writer.con, table, chunk, sources, name))
        writer.report.unmapped = unmapped
        return writer.report
    finally:
        if tmp is not None:
            tmp.cleanup()


def _chunks(group: list[DataFile]) -> list[list[DataFile]]:
    """Files of one table in batches of at most BATCH_ROWS rows (memory stays bounded;
    each batch becomes one partition file)."""
    out: list[list[DataFile]] = [[]]
    rows = 0
    for f in group:
        n = pq.read_metadata(f.path).num_rows
        if out[-1] and rows + n > BATCH_ROWS:
            out.append([])
            rows = 0
        out[-1].append(f)
        rows += n
    return out


def _stage(con: duckdb.DuckDBPyConnection, table: str, group: list[DataFile], sources, name: str) -> str:
    """The SQL staging one table's files as corpus rows."""
    con.register(
        "__archsql_files",
        pa.table(
            {
                "filename": [str(f.path) for f in group],
                "source_key": [sources[f.rel].key for f in group],
                "source_hash": [sources[f.rel].hash for f in group],
                "gpu": [SYSTEM_GPUS.get(f.system, f.system) for f in group],
                "library": [f.framework for f in group],
                "library_version": [f.version for f in group],
            }
        ),
    )
    con.execute("create or replace temp table __files as select * from __archsql_files")
    con.unregister("__archsql_files")
    paths = ", ".join("'" + str(f.path).replace("'", "''") + "'" for f in group)
    raw = f"read_parquet([{paths}], filename = true, union_by_name = true, file_row_number = true)"
    available = {r[0] for r in con.execute(f"describe select * from {raw}").fetchall()}
    selects = [_select(m, table, available, name, raw) for m in TABLES[table]]
    return " union all ".join(selects)


def _select(m: TableMap, table: str, available: set[str], name: str, raw: str) -> str:
    defaults = {
        "op_name": "op_name",
        "device_name": "device",
        "library_version_reported": "version",
        "kernel": "kernel_source",
    }
    columns = {**defaults, **m.columns}
    out = []
    for f in CORPUS_SCHEMA:
        col = f.name
        if col == "source":
            out.append(f"'{name}' as source")
        elif col in ("source_key", "source_hash", "gpu", "library", "library_version"):
            out.append(f"f.{col}")
        elif col == "source_row":
            out.append("r.file_row_number as source_row")
        elif col == "latency_us":
            out.append(f"({_expr(m.latency, available, 'double')}) * {_UNIT_US[m.unit]} as latency_us")
        elif col == "attrs":
            present = [a for a in m.attrs if a in available]
            packed = ", ".join(f"{a} := r.{a}" for a in present)
            out.append(f"to_json(struct_pack({packed}))::varchar as attrs" if present else "null::varchar as attrs")
        elif col in m.config:
            out.append(f"g.{m.config[col]}::{sql_type(f.type)} as {col}")
        elif col in columns:
            out.append(f"({_expr(columns[col], available, sql_type(f.type))})::{sql_type(f.type)} as {col}")
        else:
            out.append(f"null::{sql_type(f.type)} as {col}")
    note = f"aiconfigurator {table}.{m.latency} is in {m.unit}"
    # the model's config (geometry); a file without a model column gets none
    on = "g.model = r.model" if "model" in available else "false"
    return f"""
        select {", ".join(out)}, null::{ISSUE_TYPE} as __issues, '{note}' as __note
        from {raw} as r join __files as f on f.filename = r.filename
        left join __model_configs as g on {on}
    """


def _expr(sql: str, available: set[str], type_name: str) -> str:
    """``sql`` with its columns qualified by ``r.``; null when it names a missing column."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    names = {c.name for c in tree.find_all(exp.Column)}
    if not names <= available:
        return f"null::{type_name}"
    for column in tree.find_all(exp.Column):
        column.set("table", exp.to_identifier("r"))
    return tree.sql(dialect="duckdb")


def _version_near(data: Path) -> str:
    """The package version of an unpacked tree: its dist-info, else 'unknown'."""
    for parent in data.parents:
        for info in parent.glob("aiconfigurator_core-*.dist-info"):
            match = re.match(r"aiconfigurator_core-(.+)\.dist-info", info.name)
            if match:
                return match.group(1)
    return "unknown"
