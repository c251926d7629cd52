"""The package's layers, lowest first; written once here and checked by
``tests/test_import_layers.py``.

A module imports from its own layer or lower ones, never from a higher one (function-local
imports included); modules of one layer may import each other as long as no two top-level
units (a module or subpackage named below) import each other in a cycle.  A lower layer that
needs a higher one's behaviour takes it as a parameter or a registered hook
(:mod:`archsql.schema.ops`, :func:`archsql.api.register_readable_dir`).  The package root
(``archsql/__init__.py``: the version only) sits below every layer.
"""

from __future__ import annotations

LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: facts in; import nothing of archsql above them
    ("errors", "dtypes", "layers"),
    ("ingest", "gpus"),
    # spec types, parsing, cross-reference checks; the YAML library
    ("schema", "specs", "source_guard", "defaults"),
    # spec → Analysis tables (passes; primitives own their rules)
    ("evaluator",),
    # DuckDB file, parameter tables, SQL views
    ("views", "store", "store_layout", "store_hold"),
    # answers built on the store
    (
        "output",
        "api",
        "parameters",
        "sweep",
        "serving",
        "silicon",
        "queries",
        "publish_check",
        "design",
        "kernel_corpus",
        "launch",
        "author",
        "spark",
    ),
    # commands
    ("cli", "cli_params", "design.cli", "kernel_corpus.cli", "site", "launch_cli", "author.cli", "__main__"),
)
