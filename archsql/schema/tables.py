"""Arrow schemas of the evaluated tables and the parameter tables.

This module is the contract between the evaluator (which fills these tables once per
model) and the SQL views (which derive everything else).  Only facts decided during the
walk are stored; bytes, totals, per-workload numbers are views.

Keys: ``model`` (catalog name) + ``uid`` (node uid, unique within a model across phases;
a node present in both phases has the same uid in both).
"""

from __future__ import annotations

import pyarrow as pa

from archsql.gpus.architectures import GPU_ARCHITECTURES_SCHEMA
from archsql.gpus.table import GPU_SCHEMA
from archsql.ingest.tables import CHECKPOINT_TABLES
from archsql.schema.fusion import FUSION_RULES_SCHEMA
from archsql.schema.parallel import PARALLEL_GROUPS_SCHEMA
from archsql.schema.serving import (
    SERVING_CONSTANTS_SCHEMA,
    SERVING_FRAMEWORKS_SCHEMA,
    SERVING_GPU_GENERATIONS_SCHEMA,
)

PHASES = ("prefill", "decode")

TABLES: dict[str, pa.Schema] = {
    # one row per model in the store
    "models": pa.schema(
        [
            ("model", pa.string()),  # catalog name, e.g. Meta-Llama-3.1-8B
            ("hf_id", pa.string()),  # Hugging Face repo id the config came from
            ("spec_file", pa.string()),
            ("config_file", pa.string()),
            ("spec_sha256", pa.string()),  # of spec + config, for reproducibility
        ]
    ),
    # every bound model dim: value and the binding it came from
    "dims": pa.schema(
        [
            ("model", pa.string()),
            ("dim", pa.string()),
            ("value", pa.int64()),
            ("binding", pa.string()),  # e.g. "config.hidden_size"
            ("kind", pa.string()),  # from the global dims table
        ]
    ),
    # repeated stacks of layers: decoder layers, or multi-token-prediction (mtp) layers that
    # are on disk but optional at serving
    "stacks": pa.schema(
        [
            ("model", pa.string()),
            ("stack", pa.string()),
            ("role", pa.string()),  # decoder | mtp
            ("layers", pa.int32()),
            ("first_layer", pa.int32()),  # checkpoint index of the first layer
            ("path", pa.string()),
        ]
    ),
    # which block template each layer of each stack uses (layer = checkpoint index)
    "layer_schedule": pa.schema(
        [("model", pa.string()), ("stack", pa.string()), ("layer", pa.int32()), ("template", pa.string())]
    ),
    # every stream of every stack (docs/specir.md "Streams"): the carried residual, internal
    # streams (a node's value in one layer read by later layers) and append streams (values
    # archived on chosen layers, read each / all / concat).  src is what the source guard
    # looks for in the model's forward source.  Layers are checkpoint indices (layer_schedule).
    "streams": pa.schema(
        [
            ("model", pa.string()),
            ("stack", pa.string()),  # the stack that declares (produces) the stream
            ("stream", pa.string()),
            ("kind", pa.string()),  # carried | internal | append
            ("read", pa.string()),  # append: each | all | concat; else null
            ("archive_at", pa.string()),  # append: after (layer exit) | before (layer entry); else null
            ("source", pa.string()),  # from: a node path in the stack's templates, or the carried stream
            ("layers", pa.list_(pa.int32())),  # producing (carried, internal) or archived (append) layers
            ("producers", pa.list_(pa.string())),  # uids of the nodes whose values the stream holds
            ("readers", pa.list_(pa.string())),  # uids of the nodes that read it (both phases)
            ("src", pa.string()),  # a sentence with a back-quoted fragment of the forward source
        ]
    ),
    # what each reading layer (or model-graph reader, stack null) reads of an internal or
    # append stream: the layers whose values it gets.  For read: all / concat, elements is the
    # history length the layer sees; `group by elements` is the history length -> layers
    # distribution, and `template` names the group the layers were evaluated as
    # (<template>@<length>, one expansion per length).
    "stream_reads": pa.schema(
        [
            ("model", pa.string()),
            ("stream", pa.string()),
            ("stack", pa.string()),  # the reading layer's stack; null: a model-graph node
            ("layer", pa.int32()),  # checkpoint index of the reading layer; null outside stacks
            ("template", pa.string()),  # the template (or history-length group) the layer runs
            ("elements", pa.int32()),  # values read: 1 (internal, each) or the history length (all, concat)
            ("element_layers", pa.list_(pa.int32())),  # the producing / archived layers read, in order
        ]
    ),
    "nodes": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),  # prefill | decode
            ("uid", pa.string()),
            ("stack", pa.string()),  # null outside repeated stacks
            ("template", pa.string()),  # block template, null outside stacks
            ("path", pa.string()),  # module path, e.g. model.layers.{layer}.self_attn.q_proj
            ("op", pa.string()),  # primitive name
            ("role", pa.string()),  # roles registry
            ("component", pa.string()),  # innermost component that declared the node
        ]
    ),
    "edges": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("src_uid", pa.string()),  # null for a model input (e.g. input_ids)
            ("dst_uid", pa.string()),
            ("port", pa.int32()),  # input position at dst
            ("stream", pa.string()),  # e.g. 'hidden' when the edge crosses layers; else null
        ]
    ),
    # one row per output axis of every node
    "shapes": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),
            ("axis", pa.int32()),
            ("dim", pa.string()),  # display expression, e.g. "n_heads*d_head" or "B"
            ("size", pa.int64()),  # bound size; null for runtime symbols
            ("symbol", pa.string()),  # runtime symbol (B, s, c) when the axis is one; else null
        ]
    ),
    # per-instance quantities as sums of terms: coef * B^e_B * s^e_s * c^e_c * factor(arg).
    # Routed experts: terms are per copy, already carrying the copy's top_k/experts share
    # of tokens, so a model total is coef × instances.count (active_count is for params).
    "terms": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),
            # 'flops' | 'cache_elements' | 'read_elements' / 'write_elements' (activations in
            # memory; a flash-attention kernel keeps scores on chip) | 'cache_read_elements'
            # (decode caches a step reads, in the cache dtype) | 'comm_elements' (collective
            # nodes: global elements communicated)
            ("quantity", pa.string()),
            ("coef", pa.float64()),
            ("e_B", pa.int8()),
            ("e_s", pa.int8()),
            ("e_c", pa.int8()),
            # 'none' | 'min_c' | 'ceil_c_div' | 'window_pairs' | … | 'patches' (v^arg): SQL macro term_factor
            ("factor", pa.string()),
            ("factor_arg", pa.int64()),  # the factor's bound argument (window, ratio); 0 for 'none'
            # read_elements: the input port read (a per-device view divides each port by the
            # layout it is consumed in, layouts tensor 'in<port>'); null for other quantities
            ("port", pa.int32()),
        ]
    ),
    # display forms of the same sympy expressions the terms came from
    "formulas": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),
            ("quantity", pa.string()),
            ("symbolic", pa.string()),  # in model dims and runtime symbols
            ("bound", pa.string()),  # model dims bound, runtime symbols kept
            ("sql", pa.string()),  # bound, printed as DuckDB SQL over workload columns
        ]
    ),
    # logical elements of every weight tensor of one node instance (phase-independent)
    "weights": pa.schema(
        [
            ("model", pa.string()),
            ("uid", pa.string()),
            ("tensor", pa.string()),  # 'weight' | 'bias' | ...
            ("name", pa.string()),  # checkpoint-style name with {layer}/{expert} placeholders
            ("shape", pa.list_(pa.int64())),
            ("elements", pa.int64()),
            ("streamed", pa.bool_()),  # read whole every step (false: an embedding table, rows gathered)
        ]
    ),
    # copies of each node in the model (phase-independent).  Routed experts: one copy per
    # expert per layer; active_count = copies a single token uses (count * top_k / experts).
    "instances": pa.schema(
        [("model", pa.string()), ("uid", pa.string()), ("count", pa.int64()), ("active_count", pa.int64())]
    ),
    # how each tensor is split across parallel groups (attention, ffn, moe_tp, moe_ep, dp):
    # one row per sharded axis (placement 'S', axis >= 0) and per pending-sum group
    # (placement 'P', axis -1); an axis with no row is replicated.  tensor: 'out' (the
    # node's output), a weight tensor name, 'copies' (routed experts spread over moe_ep)
    # or 'in<port>' (an input as the op consumes it, after the collectives that prepare it),
    # or 'message' (under a collective's uid: the tensor it communicates as one device holds
    # it; axis -1: split over a group with no axis of its own).  Groups also include cp (the
    # sequence split by context parallelism).  Degrees come from deployments; the text form is archsql.evaluator.layouts.Layout.text.
    "layouts": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),
            ("tensor", pa.string()),
            ("axis", pa.int32()),
            ("placement", pa.string()),  # S | P
            ("group", pa.string()),
            # S rows: whole pieces the axis is cut into (heads, rows of a weight); a device
            # holds ceil(parts / degree) of them (the fit rule).  Null: divides evenly (requests),
            # or the axis is fused (segments).
            ("parts", pa.int64()),
            # S rows of a fused axis (a projection's output that is several tensors side by
            # side): each segment's size and whole pieces, cut separately; else null
            ("segments", pa.list_(pa.struct([("size", pa.int64()), ("parts", pa.int64())]))),
        ]
    ),
    # inferred collectives: real nodes (nodes/terms/instances rows under their own uid; their
    # 'comm_elements' terms give the global elements communicated)
    "collectives": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),  # the collective's node uid
            ("consumer_uid", pa.string()),  # the node whose input it prepares
            ("port", pa.int32()),  # -1: it follows the consumer (its output)
            ("kind", pa.string()),  # all_reduce | all_gather | all_to_all | ring_pass
            ("group", pa.string()),
        ]
    ),
    # liveness (archsql.evaluator.liveness): while node uid runs (in one layer of its template),
    # the output of live_uid is held in memory — materialized activations only (a reshape or an
    # on-chip score aliases its inputs; a cached tensor is counted with the caches).  Read by
    # the activation-peak views through each live tensor's layout and write_elements terms.
    "liveness": pa.schema(
        [
            ("model", pa.string()),
            ("phase", pa.string()),
            ("uid", pa.string()),
            ("live_uid", pa.string()),
        ]
    ),
    # declared caches: what decode keeps across steps, per instance and request
    "caches": pa.schema(
        [
            ("model", pa.string()),
            ("uid", pa.string()),  # the node whose output is cached
            ("cache", pa.string()),  # cache family / name, e.g. 'kv'
            ("kind", pa.string()),  # key | value | latent | rope_key | index_key | state | ...
            ("growth", pa.string()),  # per_token | window | compressed | state | chunk
            ("elements", pa.int64()),  # per cached position (state: per request)
            # growth window: positions kept, min(c, window); growth chunk: positions per
            # attention chunk, the latest token's chunk is kept: (c - 1) mod window + 1
            ("window", pa.int64()),
            ("ratio", pa.int64()),  # growth compressed: ceil(c / ratio) positions
            # storage rule: kv (the deployment's kv dtype) | act (its act dtype) | a fixed dtype
            ("dtype", pa.string()),
            ("scale_dtype", pa.string()),  # a fixed dtype's scales: one of scale_dtype ...
            ("scale_block", pa.int64()),  # ... per scale_block elements (null: no scale)
        ]
    ),
    # how each weight tensor is stored (archsql.evaluator.storage): one row per stored tensor
    # template — the data part of a logical weight, each sibling of its quant scheme (scales,
    # zero points, ...) and declared buffers — for the checkpoint's own storage (profile
    # 'native') or a precision profile.  Bytes are views (storage_dtypes.bits).
    "storage_tensors": pa.schema(
        [
            ("model", pa.string()),
            ("profile", pa.string()),  # 'native' | a profile of archsql/specs/quant/profiles
            ("uid", pa.string()),
            ("tensor", pa.string()),  # the logical tensor (weights.tensor) or the buffer's name
            ("part", pa.string()),  # 'data' | a sibling of the scheme (weight_scale_inv, ...) | 'buffer'
            ("name", pa.string()),  # stored name with {layer}/{expert} placeholders
            ("layers", pa.list_(pa.int32())),  # layers of the node's stack this row covers; null outside stacks
            ("scheme", pa.string()),  # quant scheme (archsql/specs/quant/<scheme>.yaml)
            ("rule", pa.string()),  # the quant_context rule that chose it
            ("dtype", pa.string()),  # stored dtype (safetensors name)
            ("shape", pa.list_(pa.int64())),  # stored shape
            ("packing", pa.int64()),  # data part: logical elements per stored element; else null
            # per stored axis: the weight axis it follows (weights.shape index, -1 the stacked
            # copies axis, null none: a scalar scale, a block width) and the divisor, stored size
            # = ceil(that axis / divisor) — how a device's slab of the weight maps to storage
            ("axis_map", pa.list_(pa.struct([("axis", pa.int32()), ("divisor", pa.int64())]))),
        ]
    ),
}

# Parameter tables: what users ask about.  Written by `archsql build`, editable by users.
PARAMETER_TABLES: dict[str, pa.Schema] = {
    "workloads": pa.schema(
        [
            ("workload", pa.string()),
            ("phase", pa.string()),
            ("batch", pa.int64()),  # B: requests in the step
            ("new_tokens", pa.int64()),  # s: tokens computed per request this step
            ("context", pa.int64()),  # c: tokens attended after the step (cached + new)
        ]
    ),
    # the images a workload's requests bring (a vision tower's input); a workload with no
    # row here is text-only (v = 0)
    "workload_images": pa.schema(
        [
            ("workload", pa.string()),
            ("image_patches", pa.int64()),  # v: image patches per request this step (one image)
        ]
    ),
    "dtypes": pa.schema([("dtype", pa.string()), ("bytes", pa.float64()), ("description", pa.string())]),
    "gpus": GPU_SCHEMA,
    # how a model is laid out on GPUs: the GPUs, dtypes and memory; the degree of each
    # parallel axis is a deployment_mesh row (archsql.schema.parallel.MESH_AXES).  Attention
    # layers run tp × cp × dp (tensor × context × data parallel over requests) per pipeline
    # stage; MoE layers run ep × moe_tp on the same GPUs.
    "deployments": pa.schema(
        [
            ("deployment", pa.string()),
            ("gpu", pa.string()),  # a gpus.gpu name
            ("gpus", pa.int64()),  # GPUs in the deployment
            ("cp_kind", pa.string()),  # 'ulysses' (head all-to-all) | 'ring' (K/V passed around) | 'none' (cp 1)
            ("nodes", pa.int64()),  # nodes the GPUs span; null: ceil(gpus / the GPU's scale-up domain)
            # the dtypes.dtype the matmuls by quantized weights run in; null: each in the dtype of
            # its own stored elements (fp8 for FP8 blocks, fp4 for MXFP4) — a 'native' deployment,
            # whose quantized format differs from model to model
            ("weight_dtype", pa.string()),
            ("act_dtype", pa.string()),
            ("kv_dtype", pa.string()),
            # of GPU memory, the rest is reserve; null: the default of the deployment's framework
            # (deployment_frameworks, frameworks)
            ("usable_memory_fraction", pa.float64()),
            # how the weights are stored on the GPUs: 'native' (the checkpoint's own storage) or a
            # precision profile (archsql/specs/quant/profiles: bf16, fp8, nvfp4, mxfp4); per-device
            # weight bytes count each stored tensor of it (data, scales, ...) through the layouts
            ("weight_profile", pa.string()),
            # draft tokens proposed per decode step by the model's own multi-token-prediction
            # (MTP) stack (vLLM speculative_config num_speculative_tokens, method mtp; SGLang
            # speculative_num_steps).  Null or 0: the MTP stack is not loaded (not in device
            # memory, not run).  k > 0: its weights are held (its embedding and head are the
            # target model's, counted once) and it runs k forwards per decode step, one per
            # prefill step (docs/pricing.md "MTP weights and draft steps")
            ("speculative_tokens", pa.int64()),
        ]
    ),
    # serving frameworks and how each sizes the memory it may fill (weights + caches +
    # activations): vLLM `gpu_memory_utilization` (a fixed default), SGLang
    # `mem_fraction_static` (default_fraction null: derived from the GPU memory and the
    # parallel sizes by the rule in int_deployment_memory, after SGLang's server_args.py)
    "frameworks": pa.schema(
        [
            ("framework", pa.string()),  # 'vllm' | 'sglang'
            ("memory_knob", pa.string()),  # the framework's own option name
            ("default_fraction", pa.float64()),  # null: derived by the framework's rule
            ("source", pa.string()),  # where the default is read from (file and function)
        ]
    ),
    # the framework a deployment is served with; its usable memory fraction is
    # deployments.usable_memory_fraction when given, else the framework's default
    "deployment_frameworks": pa.schema([("deployment", pa.string()), ("framework", pa.string())]),
    # the degree of each parallel axis of a deployment (DTensor's DeviceMesh: names and sizes);
    # an axis of archsql.schema.parallel.MESH_AXES with no row has its default degree (1)
    "deployment_mesh": pa.schema([("deployment", pa.string()), ("axis", pa.string()), ("degree", pa.int64())]),
    # a framework launch flag a deployment sets (vLLM's pass_config.enable_fi_allreduce_fusion,
    # SGLang's --enable-flashinfer-allreduce-fusion); a flag with no row has the default its
    # fusion rule states (archsql/specs/fusion/*.yaml, fusion_rules.flag_default)
    "deployment_flags": pa.schema([("deployment", pa.string()), ("flag", pa.string()), ("enabled", pa.bool_())]),
    # bits per element of every stored dtype (safetensors names; ingest.safetensors_headers.DTYPE_BITS)
    "storage_dtypes": pa.schema([("dtype", pa.string()), ("bits", pa.int64()), ("description", pa.string())]),
    # multimodal wrapper prefixes of tensor names → canonical prefix (specs/checkpoint_prefixes.yaml)
    "checkpoint_prefixes": pa.schema(
        [("prefix", pa.string()), ("canonical", pa.string()), ("description", pa.string())]
    ),
    # serving questions (archsql.serving): a model on a deployment served by a framework
    # version at a client concurrency with isl / osl tokens per request; answered by the
    # serving_estimates view (docs/serving.md)
    "serving_cases": pa.schema(
        [
            ("serving_case", pa.string()),
            ("model", pa.string()),
            ("deployment", pa.string()),  # its speculative_tokens is the MTP draft length
            ("framework", pa.string()),  # a serving_frameworks.framework
            ("version", pa.string()),  # a serving_frameworks.version ('*': not recorded)
            ("isl", pa.int64()),  # input tokens per request
            ("osl", pa.int64()),  # output tokens per request
            ("concurrency", pa.int64()),  # client concurrency (requests in flight)
            ("acceptance_rate", pa.float64()),  # P(a draft token is accepted | the previous was); null: 0
            # disaggregated prefill/decode (xPyD): the deployment of the prefill pool (null:
            # aggregated, `deployment` serves both), its instances (x; null: 1), the decode pool's
            # instances of `deployment` (y; null: 1) and the link the KV cache crosses between
            # them (null: the slower scale-out NIC of the two GPUs, gpus.csv; latency 0)
            ("prefill_deployment", pa.string()),
            ("prefill_instances", pa.int64()),
            ("decode_instances", pa.int64()),
            ("kv_link_bytes_per_s", pa.float64()),
            ("kv_link_latency_s", pa.float64()),
        ]
    ),
}


# The natural key of every parameter table: a row given twice is a constraint error.
PARAMETER_KEYS: dict[str, tuple[str, ...]] = {
    "workloads": ("workload",),
    "workload_images": ("workload",),
    "dtypes": ("dtype",),
    "gpus": ("gpu",),
    "deployments": ("deployment",),
    "frameworks": ("framework",),
    "deployment_frameworks": ("deployment",),
    "deployment_mesh": ("deployment", "axis"),
    "deployment_flags": ("deployment", "flag"),
    "storage_dtypes": ("dtype",),
    "checkpoint_prefixes": ("prefix",),
    "serving_cases": ("serving_case",),
}
assert set(PARAMETER_KEYS) == set(PARAMETER_TABLES)

# the measured op kind of the kernel each node op launches (Primitive.kernel_kind) and its stage
# in an attention kernel (Primitive.attention_stage: score | apply)
OP_KERNELS_SCHEMA = pa.schema([("op", pa.string()), ("op_kind", pa.string()), ("attention_stage", pa.string())])
# the unit every node op's FLOPs run on (Primitive.math_class: weight_gemm | activation_gemm |
# vector), which picks the peak op_sol prices them at
OP_MATH_SCHEMA = pa.schema([("op", pa.string()), ("math_class", pa.string())])

# Reference tables written from code on every build (not yours to edit): the parallel
# groups of the mesh axes (archsql.schema.parallel), the op kinds of the primitives'
# kernels and their math classes (archsql.evaluator.primitives.base.op_kernels_table,
# op_math_table), and the frameworks' fusion rules (archsql/specs/fusion/*.yaml,
# archsql.schema.fusion) and the GPUs' architecture families (archsql/gpus/architectures.csv).
REFERENCE_TABLES: dict[str, pa.Schema] = {
    "parallel_groups": PARALLEL_GROUPS_SCHEMA,
    "op_kernels": OP_KERNELS_SCHEMA,
    "op_math": OP_MATH_SCHEMA,
    "fusion_rules": FUSION_RULES_SCHEMA,
    "gpu_architectures": GPU_ARCHITECTURES_SCHEMA,
    # serving facts (archsql/specs/serving/*.csv, archsql.schema.serving)
    "serving_frameworks": SERVING_FRAMEWORKS_SCHEMA,
    "serving_gpu_generations": SERVING_GPU_GENERATIONS_SCHEMA,
    "serving_constants": SERVING_CONSTANTS_SCHEMA,
}
REFERENCE_KEYS: dict[str, tuple[str, ...]] = {
    "parallel_groups": ("group",),
    "op_kernels": ("op",),
    "op_math": ("op",),
    "fusion_rules": ("framework", "version", "rule"),
    "gpu_architectures": ("gpu",),
    "serving_frameworks": ("framework", "version", "min_gpu_memory_gib"),
    "serving_gpu_generations": ("gpu",),
    "serving_constants": ("constant", "applies_to"),
}


def empty(name: str) -> pa.Table:
    schema = TABLES.get(name) or PARAMETER_TABLES[name]
    return schema.empty_table()


__all__ = ["CHECKPOINT_TABLES", "PARAMETER_TABLES", "PHASES", "TABLES", "empty"]
