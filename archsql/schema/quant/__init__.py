"""Quantization as data: the schemes of ``archsql/specs/quant/*.yaml``, the ``quant_context``
of a model spec, precision profiles, and what a checkpoint's own quantization config says.

A **scheme** is one on-disk form of a logical weight: its storage dtype and packing factor
(logical elements per stored element), the name of the stored tensor (``{name}`` = the
logical tensor name, ``{module}`` = its module path), its sibling tensors (scales, zero
points, group indices) with shape formulas over the logical trailing axes (``axes:``, e.g.
``rows``/``cols`` = ``[out, in]``) and the scheme's integer params, the element format and
the scale granularity, and how a config's ``quantization_config`` (or a ModelOpt
``hf_quant_config.json``) selects it.  Formulas go through the safe dim-expression parser
(:func:`archsql.schema.expr.parse_dim_expr`), never ``eval``.  Adding a scheme is adding a
YAML file.

A **quant_context** (model spec key) says which scheme stores which weight::

    quant_context:
      dtype: BF16                     # storage dtype of what is not quantized (default: config torch_dtype)
      from_config: true               # also read quantization_config / hf_quant_config.json (default)
      default: { method: fp8_block }  # quantizable weights without a more specific rule
      roles: { mtp: none }            # per role
      overrides:                      # named, by module-path pattern; first match wins
        - { name: fp32_bias, match: "*.e_score_correction_bias", dtype: F32 }
      ignore: [lm_head]               # modules kept unquantized (modules_to_not_convert)

Precedence for one tensor: overrides → ignore → roles → default → ``none``.  A scheme
applies only to the ops and tensors it names (``applies_to``); elsewhere the tensor falls
back to ``none`` in the storage dtype.  A **profile** (``specs/quant/profiles/*.yaml``) is a
quant_context that replaces the keys it gives — "deploy in NVFP4" — through the same code
path (:mod:`archsql.evaluator.storage`).

Patterns are globs (``*`` spans dots) matched against a tensor's module path and its full
name, as a whole, as an enclosing module (``model.layers.0`` matches everything in layer 0)
or as a trailing part (``gate`` matches ``model.layers.3.mlp.gate``, not ``gate_proj``); a
pattern may name layers, not single experts (expert names keep their ``{expert}``
placeholder while matching).  Multimodal prefixes (``checkpoint_prefixes.yaml``) are
normalized in patterns as they are in tensor names.

Modules: ``schemes`` (the scheme registry), ``context`` (a spec's quant_context, patterns),
``profiles``, ``checkpoint_config`` (what a checkpoint's quantization config says), ``names``
(checkpoint-name prefixes), ``buffers``, ``tables`` (the quant parameter tables).
"""

from __future__ import annotations

from archsql.schema.quant.buffers import BUFFER_KEYS, Buffer, parse_buffers
from archsql.schema.quant.checkpoint_config import (
    config_dtype,
    config_path_value,
    quant_document,
    read_hf_quant_config,
    rules_from_config,
)
from archsql.schema.quant.context import (
    CONTEXT_KEYS,
    OVERRIDE_KEYS,
    RULE_KEYS,
    Override,
    Pattern,
    QuantContext,
    Rule,
    dtype_field,
    glob_regex,
    located,
    matches,
    parse_quant_context,
    suggest,
)
from archsql.schema.quant.names import PREFIXES_FILE, canonical_name, checkpoint_prefixes
from archsql.schema.quant.profiles import PROFILE_KEYS, PROFILES_DIR, Profile, load_profile, profile_names
from archsql.schema.quant.schemes import (
    APPLIES_KEYS,
    CONTEXT,
    DATA_KEYS,
    ELLIPSIS,
    FROM_CONFIG_KEYS,
    GRANULARITIES,
    NONE,
    PARAM_KEYS,
    PARAM_KINDS,
    QUANT_DIR,
    SCHEME_KEYS,
    SCHEME_REQUIRED,
    SIBLING_KEYS,
    SPECS_DIR,
    FormulaError,
    FromConfig,
    PartSpec,
    QuantScheme,
    SchemeParam,
    default_schemes,
    glob_ok,
    load_schemes,
    parse_scheme,
)
from archsql.schema.quant.tables import checkpoint_prefixes_table, storage_dtypes_table

__all__ = [
    "APPLIES_KEYS",
    "BUFFER_KEYS",
    "CONTEXT",
    "CONTEXT_KEYS",
    "DATA_KEYS",
    "ELLIPSIS",
    "FROM_CONFIG_KEYS",
    "GRANULARITIES",
    "NONE",
    "OVERRIDE_KEYS",
    "PARAM_KEYS",
    "PARAM_KINDS",
    "PREFIXES_FILE",
    "PROFILES_DIR",
    "PROFILE_KEYS",
    "QUANT_DIR",
    "RULE_KEYS",
    "SCHEME_KEYS",
    "SCHEME_REQUIRED",
    "SIBLING_KEYS",
    "SPECS_DIR",
    "Buffer",
    "FormulaError",
    "FromConfig",
    "Override",
    "PartSpec",
    "Pattern",
    "Profile",
    "QuantContext",
    "QuantScheme",
    "Rule",
    "SchemeParam",
    "canonical_name",
    "checkpoint_prefixes",
    "checkpoint_prefixes_table",
    "config_dtype",
    "config_path_value",
    "default_schemes",
    "dtype_field",
    "glob_ok",
    "glob_regex",
    "load_profile",
    "load_schemes",
    "located",
    "matches",
    "parse_buffers",
    "parse_quant_context",
    "parse_scheme",
    "profile_names",
    "quant_document",
    "read_hf_quant_config",
    "rules_from_config",
    "storage_dtypes_table",
    "suggest",
]
