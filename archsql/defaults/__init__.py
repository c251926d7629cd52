"""The default parameter rows a new store starts with: ``<table>.csv`` files here, read by
named columns into the contract schema of :data:`archsql.schema.tables.PARAMETER_TABLES`.

``deployments.csv`` holds each deployment's GPUs, dtypes and memory; ``deployment_mesh.csv``
the degree of every parallel axis that is not its default (archsql.schema.parallel), one row
per (deployment, axis).  Edit the files to change what ``archsql build`` writes into a new
store; a store's own tables are the user's to edit afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from archsql.schema.tables import PARAMETER_TABLES

DEFAULTS_DIR = Path(__file__).parent
DEFAULT_TABLES = ("workloads", "dtypes", "deployments", "deployment_mesh", "frameworks", "deployment_frameworks")


def load_default(name: str) -> pa.Table:
    """The default rows of the parameter table ``name`` (``archsql/defaults/<name>.csv``),
    columns by name, cast to the contract schema; empty strings are nulls."""
    schema = PARAMETER_TABLES[name]
    path = DEFAULTS_DIR / f"{name}.csv"
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            column_types=schema, strings_can_be_null=True, include_columns=schema.names
        ),
    )
    missing = [c for c in schema.names if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return table.select(schema.names).cast(schema)
