"""Stored dtypes: bits per element of every safetensors dtype, the config.json
``torch_dtype`` names, and one-line descriptions.  A leaf: imports nothing of archsql."""

from __future__ import annotations

# Bits per element of every dtype the safetensors format knows (``Dtype::bitsize`` in tensor.rs).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

# config.json torch_dtype / dtype → safetensors dtype
TORCH_DTYPES = {
    "bfloat16": "BF16",
    "float16": "F16",
    "half": "F16",
    "float32": "F32",
    "float": "F32",
    "float64": "F64",
}

DTYPE_DOC = {
    "BOOL": "boolean, one byte",
    "F4": "4-bit float e2m1",
    "F6_E2M3": "6-bit float e2m3",
    "F6_E3M2": "6-bit float e3m2",
    "F8_E4M3": "8-bit float e4m3 (fn)",
    "F8_E5M2": "8-bit float e5m2",
    "F8_E8M0": "8-bit power-of-two scale (e8m0)",
    "F8_E4M3FNUZ": "8-bit float e4m3 fnuz",
    "F8_E5M2FNUZ": "8-bit float e5m2 fnuz",
    "BF16": "bfloat16",
    "F16": "IEEE half precision",
    "F32": "IEEE single precision",
    "F64": "IEEE double precision",
}


def dtype_description(dtype: str) -> str:
    """The ``storage_dtypes.description`` of a safetensors dtype."""
    bits = DTYPE_BITS[dtype]
    if dtype in DTYPE_DOC:
        return DTYPE_DOC[dtype]
    if dtype[0] in "IU":
        return f"{bits}-bit {'unsigned' if dtype[0] == 'U' else 'signed'} integer"
    return f"{bits}-bit"
