"""The quant parameter tables the store is created with: ``storage_dtypes`` and
``checkpoint_prefixes``."""

from __future__ import annotations

from archsql.dtypes import DTYPE_BITS, dtype_description
from archsql.schema.quant.names import checkpoint_prefixes


def storage_dtypes_table():
    """The ``storage_dtypes`` parameter table: bits of every safetensors dtype."""
    import pyarrow as pa

    from archsql.schema.tables import PARAMETER_TABLES

    rows = [
        {
            "dtype": d,
            "bits": b,
            "description": dtype_description(d),
        }
        for d, b in DTYPE_BITS.items()
    ]
    return pa.Table.from_pylist(rows, schema=PARAMETER_TABLES["storage_dtypes"])


def checkpoint_prefixes_table():
    """The ``checkpoint_prefixes`` parameter table (``specs/checkpoint_prefixes.yaml``)."""
    import pyarrow as pa

    from archsql.schema.tables import PARAMETER_TABLES

    rows = [{"prefix": p, "canonical": c, "description": d} for p, c, d in checkpoint_prefixes()]
    return pa.Table.from_pylist(rows, schema=PARAMETER_TABLES["checkpoint_prefixes"])
