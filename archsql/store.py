"""The DuckDB store: evaluated tables, parameter tables, ``store_meta`` and the views.

``write_store`` loads the per-model Arrow tables the evaluator produced (zero-copy: each
table is registered with DuckDB and copied by ``CREATE TABLE … AS SELECT``), writes the
parameter tables with defaults when absent, records a ``store_meta`` row and (re)creates
the views.  Everything happens in one transaction, so a failed write leaves the store as
it was.  ``connect`` opens an existing store and says how to build one when there is none.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql import __version__
from archsql.errors import Issue, StoreError, did_you_mean
from archsql.gpus import load_gpus
from archsql.schema.tables import CHECKPOINT_TABLES, PARAMETER_TABLES, TABLES
from archsql.views import create_views

_K = 1024

# name, phase, batch, new_tokens, context (context = tokens attended after the step)
_PREFILL = [("prefill_1", 1), *((f"prefill_{n}k", n * _K) for n in (2, 8, 32, 128))]
_DECODE_CONTEXTS = (2, 8, 32, 128)
DEFAULT_WORKLOADS: list[tuple[str, str, int, int, int]] = [
    *((name, "prefill", 1, n, n) for name, n in _PREFILL),
    *((f"decode_b{b}_c{c}k", "decode", b, 1, c * _K) for b in (1, 64) for c in _DECODE_CONTEXTS),
]

DEFAULT_DTYPES: list[tuple[str, float, str]] = [
    ("fp32", 4.0, "IEEE 754 single precision"),
    ("bf16", 2.0, "bfloat16: 8-bit exponent, 7-bit mantissa"),
    ("fp16", 2.0, "IEEE 754 half precision"),
    ("fp8", 1.0, "8-bit float (e4m3 / e5m2), scales not included"),
    ("fp4", 0.5, "4-bit float (e2m1), block scales not included"),
]


def _deployment(
    gpu: str,
    short: str,
    gpus: int,
    tp: int,
    dp: int,
    ep: int,
    moe_tp: int,
    kv: str = "bf16",
    weights: str = "bf16",
    *,
    pp: int = 1,
    cp: int = 1,
    cp_kind: str = "none",
):
    degrees = (("tp", tp, ""), ("cp", cp, f"-{cp_kind}"), ("dp", dp, ""), ("ep", ep, ""), ("pp", pp, ""))
    layout = "-".join(f"{k}{v}{tail}" for k, v, tail in degrees if v > 1) or "single"
    suffix = ("" if weights == "bf16" else f"-w{weights}") + ("" if kv == "bf16" else f"-kv{kv}")
    return (
        f"{gpus}x{short}-{layout}{suffix}",
        gpu,
        gpus,
        tp,
        dp,
        ep,
        moe_tp,
        pp,
        cp,
        cp_kind,
        None,  # nodes: ceil(gpus / the GPU's scale-up domain)
        weights,
        "bf16",
        kv,
        0.9,
        weights,  # weight_profile: the precision profile of the same name (archsql/specs/quant/profiles)
    )


DEFAULT_DEPLOYMENTS = [
    _deployment("H200 SXM", "H200", 1, 1, 1, 1, 1),
    *(
        _deployment(gpu, short, 8, tp, dp, ep, moe_tp)
        for gpu, short in (("H200 SXM", "H200"), ("B200 (HGX/DGX B200)", "B200"))
        for tp, dp, ep, moe_tp in ((8, 1, 1, 8), (8, 1, 8, 1), (1, 8, 8, 1))
    ),
    _deployment("H200 SXM", "H200", 8, 8, 1, 8, 1, kv="fp8"),
    # FP8 weights, as DeepSeek-V3/R1/V3.2, Kimi-K2 and MiniMax ship
    *(
        _deployment(gpu, short, 8, tp, dp, ep, 1, weights="fp8")
        for gpu, short in (("H200 SXM", "H200"), ("B200 (HGX/DGX B200)", "B200"))
        for tp, dp, ep in ((8, 1, 8), (1, 8, 8))
    ),
    # context parallel (attention tp 4 × cp 2; experts moe_tp 8), both kinds
    *(_deployment("H200 SXM", "H200", 8, 4, 1, 1, 8, cp=2, cp_kind=kind) for kind in ("ring", "ulysses")),
    # two 8-GPU nodes: experts over both (EP16 crosses the nodes), or a pipeline stage per node
    _deployment("H200 SXM", "H200", 16, 8, 2, 16, 1),
    _deployment("H200 SXM", "H200", 16, 8, 1, 1, 8, pp=2),
]


_DEFAULTS = {
    "workloads": DEFAULT_WORKLOADS,
    "workload_images": [],  # text-only workloads; add (workload, image_patches) rows
    "dtypes": DEFAULT_DTYPES,
    "gpus": load_gpus,
    "deployments": DEFAULT_DEPLOYMENTS,
    "storage_dtypes": lambda: _quant().storage_dtypes_table(),
    "checkpoint_prefixes": lambda: _quant().checkpoint_prefixes_table(),
}


def _quant():
    from archsql.schema import quant

    return quant


_BUILD_HINT = "run `archsql build` to create the store"


def write_store(db_path: str | Path, tables: Mapping[str, pa.Table], *, replace_models: bool = True) -> None:
    """Write evaluated tables (all models concatenated) into the DuckDB file at ``db_path``.

    Rows of the models present in ``tables`` replace that model's rows already in the
    store; other models are kept.  With ``replace_models=False`` a model that is already in
    the store is an error instead.  Parameter tables given in ``tables`` replace the stored
    ones; absent ones are created with defaults once and then left to the user.
    """
    unknown = sorted(set(tables) - set(TABLES) - set(PARAMETER_TABLES))
    if unknown:
        known = [*TABLES, *PARAMETER_TABLES]
        raise StoreError(issues=[Issue(f"unknown table '{name}'", hint=did_you_mean(name, known)) for name in unknown])
    evaluated = {name: _conform(name, schema, tables.get(name)) for name, schema in TABLES.items()}
    params = {n: _conform(n, s, tables[n]) for n, s in PARAMETER_TABLES.items() if n in tables}
    models = sorted({m for t in evaluated.values() for m in t.column("model").unique().to_pylist() if m})

    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = _open(path, read_only=False)
    con.begin()
    try:
        existing = _table_names(con)
        _check_layouts(con, existing, {**TABLES, **PARAMETER_TABLES, **CHECKPOINT_TABLES}, path)
        if not replace_models and "models" in existing:
            _refuse_present_models(con, models)
        for name, table in evaluated.items():
            _write_evaluated(con, name, table, models, exists=name in existing)
        for name, schema in PARAMETER_TABLES.items():
            if name in params:
                _replace_table(con, name, params[name], exists=name in existing)
            elif name not in existing:
                rows = _DEFAULTS[name]
                default = (
                    rows()
                    if callable(rows)
                    else pa.Table.from_pylist(
                        [dict(zip(schema.names, row, strict=True)) for row in rows], schema=schema
                    )
                )
                _replace_table(con, name, default, exists=False)
        for name, schema in CHECKPOINT_TABLES.items():  # filled by write_checkpoint
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        _record_meta(con, models)
        create_views(con)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()  # after commit or rollback


def write_checkpoint(db_path: str | Path, table: pa.Table, *, model: str, profile: str = "native") -> str:
    """Load one checkpoint's ``checkpoint_tensors`` (``archsql.ingest.read_checkpoint``) into the
    store and map it to the model (and storage profile) it is reconciled against; rows of the
    same checkpoint id are replaced.  Returns the checkpoint id."""
    table = _conform("checkpoint_tensors", CHECKPOINT_TABLES["checkpoint_tensors"], table)
    ids = table.column("checkpoint").unique().to_pylist()
    if len(ids) != 1:
        raise StoreError(f"write_checkpoint takes the tensors of one checkpoint, got {len(ids)} checkpoint ids")
    checkpoint = ids[0]
    con = connect(db_path, read_only=False)
    con.begin()
    try:
        known = {r[0] for r in con.execute("select model from models").fetchall()}
        if model not in known:
            raise StoreError(
                f"model '{model}' is not in the store {db_path}",
                [Issue("build it first: archsql build MODEL", hint=did_you_mean(model, known))],
            )
        rows = con.execute("select distinct profile from storage_tensors where model = ?", [model]).fetchall()
        profiles = {r[0] for r in rows}
        if profiles and profile not in profiles:
            raise StoreError(
                f"model '{model}' has no storage profile '{profile}' in the store",
                [Issue(f"stored profiles: {', '.join(sorted(profiles))}", hint=did_you_mean(profile, profiles))],
            )
        existing = _table_names(con)
        for name, schema in CHECKPOINT_TABLES.items():
            if name not in existing:
                _replace_table(con, name, schema.empty_table(), exists=False)
        con.execute("delete from checkpoint_tensors where checkpoint = ?", [checkpoint])
        con.execute("delete from checkpoints where checkpoint = ?", [checkpoint])
        _insert_arrow(con, "checkpoint_tensors", table, create=False)
        mapping = pa.Table.from_pylist(
            [{"checkpoint": checkpoint, "model": model, "profile": profile}], schema=CHECKPOINT_TABLES["checkpoints"]
        )
        _insert_arrow(con, "checkpoints", mapping, create=False)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.close()
    return checkpoint


def connect(db_path: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open an existing store; a missing or empty file is a :class:`StoreError`."""
    path = Path(db_path)
    if not path.is_file():
        raise StoreError(f"no archsql store at {path}; {_BUILD_HINT}")
    con = _open(path, read_only=read_only)
    missing = [name for name in (*TABLES, *PARAMETER_TABLES) if name not in _table_names(con)]
    if missing:
        con.close()
        what = (
            "has no archsql tables"
            if len(missing) == len(TABLES) + len(PARAMETER_TABLES)
            else f"is incomplete (missing tables: {', '.join(missing)})"
        )
        raise StoreError(f"{path} {what}; {_BUILD_HINT}")
    return con


# -- helpers -------------------------------------------------------------------------------


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        raise StoreError(f"cannot open the store {path}: {exc}") from None


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "select table_name from information_schema.tables "
        "where table_catalog = current_database() and table_schema = 'main' "
        "and table_type = 'BASE TABLE'"
    ).fetchall()
    return {r[0] for r in rows}


def _conform(name: str, schema: pa.Schema, table: pa.Table | None) -> pa.Table:
    """The table with exactly the contract's columns, in order, cast to its types."""
    if table is None:
        return schema.empty_table()
    missing = [c for c in schema.names if c not in table.column_names]
    extra = [c for c in table.column_names if c not in schema.names]
    if missing or extra:
        raise StoreError(
            f"table '{name}' does not match archsql.schema.tables "
            f"(missing columns: {missing or 'none'}, unexpected columns: {extra or 'none'})"
        )
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise StoreError(f"table '{name}' cannot be cast to its contract schema: {exc}") from None


def _check_layouts(con, existing: set[str], schemas: Mapping[str, pa.Schema], path: Path) -> None:
    for name, schema in schemas.items():
        if name not in existing:
            continue
        cols = [r[0] for r in con.execute(f'describe "{name}"').fetchall()]
        if cols != schema.names:
            raise StoreError(
                f"{path}: table '{name}' has columns {cols}, this archsql expects "
                f"{schema.names}; delete the file and run `archsql build`"
            )


def _refuse_present_models(con, models: list[str]) -> None:
    present = {r[0] for r in con.execute("select model from models").fetchall()}
    clash = sorted(present.intersection(models))
    if clash:
        raise StoreError(
            f"models already in the store: {', '.join(clash)}",
            [Issue("pass replace_models=True to replace their rows")],
        )


def _write_evaluated(con, name: str, table: pa.Table, models: list[str], *, exists: bool) -> None:
    if not exists:
        _replace_table(con, name, table, exists=False)
        return
    con.execute(f'delete from "{name}" where model = any(?)', [models])
    _insert_arrow(con, name, table, create=False)


def _replace_table(con, name: str, table: pa.Table, *, exists: bool) -> None:
    if exists:
        con.execute(f'delete from "{name}"')
    _insert_arrow(con, name, table, create=not exists)


def _insert_arrow(con, name: str, table: pa.Table, *, create: bool) -> None:
    """Copy an Arrow table into DuckDB via a registered (zero-copy) scan."""
    alias = f"__archsql_in_{name}"
    cols = ", ".join(f'"{c}"' for c in table.column_names)
    con.register(alias, table)
    try:
        if create:
            con.execute(f'create table "{name}" as select {cols} from "{alias}"')
        else:
            con.execute(f'insert into "{name}" ({cols}) select {cols} from "{alias}"')
    finally:
        con.unregister(alias)


def _record_meta(con, models: list[str]) -> None:
    con.execute(
        "create table if not exists store_meta (archsql_version varchar, built_at_utc timestamp, models varchar[])"
    )
    built = datetime.now(UTC).replace(tzinfo=None)
    con.execute("insert into store_meta values (?, ?, ?)", [__version__, built, models])
