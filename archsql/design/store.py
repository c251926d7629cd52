"""The design store: a DuckDB store of its own for comparisons, edits and audits.

Design commands evaluate specs (probe models, derived models, baselines and candidates)
through the one engine (:func:`archsql.evaluator.evaluate`), write them with
:func:`archsql.store.write_store` — the same tables and views as ``archsql build`` — and
read every number back from the views with the saved SQL of ``archsql/design/sql``.  The
parameter tables (workloads, deployments) describe the design question, so the design store
is kept apart from the user's main store: its workloads are replaced by each command, and its
deployments are the ones the command reads (an edit's ledger deployment, the comparison's
contract, none for an audit): every deployment held costs its derived rows for every model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from archsql.errors import DesignError, Issue, did_you_mean
from archsql.evaluator import Analysis
from archsql.schema.parallel import split_deployment
from archsql.schema.tables import PARAMETER_TABLES, TABLES

SQL_DIR = Path(__file__).parent / "sql"
DEFAULT_DESIGN_DB = "archsql-design.duckdb"
K = 1024


def design_db(path: str | Path | None = None) -> Path:
    """``path``, else ``$ARCHSQL_DESIGN_DB``, else ``./archsql-design.duckdb``."""
    return Path(path) if path else Path(os.environ.get("ARCHSQL_DESIGN_DB", DEFAULT_DESIGN_DB))


# ---------------------------------------------------------------------------- token counts

_TOKENS = re.compile(r"^\s*(\d+)\s*([kKmM]?)\s*$")


def parse_tokens(text: str | int, what: str = "context") -> int:
    """``"64k"`` → 65536, ``"1m"`` → 1048576, ``"300"`` → 300 (k = 1024 tokens)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _TOKENS.match(str(text))
        if match is None:
            raise DesignError(
                f"{what} {text!r} is not a token count",
                [Issue("write a whole number of tokens, optionally with k (×1024) or m (×1024²)", got=str(text))],
            )
        value = int(match.group(1)) * {"": 1, "k": K, "m": K * K}[match.group(2).lower()]
    if value < 1:
        raise DesignError(f"{what} must be at least 1 token", [Issue(f"got {value}")])
    return value


def parse_contexts(text: str | Iterable[str | int]) -> tuple[int, ...]:
    """``"2k,32k,128k"`` → (2048, 32768, 131072), sorted and de-duplicated."""
    items = text.split(",") if isinstance(text, str) else list(text)
    values = sorted({parse_tokens(t) for t in items if str(t).strip()})
    if not values:
        raise DesignError("give at least one context, e.g. --context 2k,32k,128k")
    return tuple(values)


def token_label(n: int) -> str:
    """65536 → '64k'; 1000 → '1000'."""
    if n % (K * K) == 0:
        return f"{n // (K * K)}m"
    return f"{n // K}k" if n % K == 0 else str(n)


def workload_rows(contexts: Sequence[int], batch: int) -> list[dict[str, Any]]:
    """One prefill (s = c) and one decode step (s = 1) per context, ``batch`` requests each
    (``workloads`` rows by column name)."""
    rows = []
    for c in contexts:
        for name, phase, new_tokens in ((prefill_workload(c), "prefill", c), (decode_workload(c, batch), "decode", 1)):
            rows.append({"workload": name, "phase": phase, "batch": batch, "new_tokens": new_tokens, "context": c})
    return rows


def prefill_workload(context: int) -> str:
    return f"prefill_{token_label(context)}"


def decode_workload(context: int, batch: int) -> str:
    return f"decode_b{batch}_{token_label(context)}"


# ---------------------------------------------------------------------------- writing


def write(
    db: str | Path,
    analyses: Sequence[Analysis],
    *,
    workloads: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]] | None = None,
    parameters: Mapping[str, pa.Table] | None = None,
) -> Path:
    """Write evaluated models and the design's workloads into the design store ``db`` with
    :func:`archsql.store.write_store` (views recreated).  ``parameters``: the parameter tables
    of the store the design reads its hardware from (:func:`store_parameters`: deployments,
    their meshes and frameworks, GPUs, dtypes); ``deployments``: more deployments (one mapping
    each, its columns and mesh degrees by name) added to those, or, without ``parameters``,
    the only ones (none: ``[]``, for a design that reads no deployment)."""
    from archsql.store import write_store

    tables: dict[str, pa.Table] = {}
    for name in TABLES:
        parts = [a.tables[name] for a in analyses if name in a.tables]
        tables[name] = pa.concat_tables(parts) if parts else TABLES[name].empty_table()
    tables.update(parameters or {})
    tables["workloads"] = _param_table("workloads", workloads)
    if deployments is not None:
        columns = PARAMETER_TABLES["deployments"].names
        split = [split_deployment(row, columns) for row in deployments]
        added = {
            "deployments": _param_table("deployments", [scalar for scalar, _ in split]),
            "deployment_mesh": _param_table("deployment_mesh", [m for _, mesh in split for m in mesh]),
        }
        if not parameters:  # the only deployments: framework rows of others would be left dangling
            added["deployment_frameworks"] = PARAMETER_TABLES["deployment_frameworks"].empty_table()
        for name, rows in added.items():
            tables[name] = pa.concat_tables([tables[name], rows]) if parameters else rows
    path = Path(db)
    write_store(path, tables, views=read_views())
    return path


def read_views() -> list[str]:
    """The store views the design's saved SQL reads (archsql/design/sql, its views too): the
    derived rows a design store keeps are theirs and those of the views they read
    (:func:`archsql.store.refresh` ``views``); every other view reads live from them.  The
    kernel, fusion and serving reports no design reads were half the rows of a design write."""
    from archsql.views import view_files

    names = {f.name for f in view_files()}
    words: set[str] = set()
    for f in sorted(SQL_DIR.rglob("*.sql")):
        words |= {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", f.read_text(encoding="utf-8"))}
    return sorted(words & names)


def _param_table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=PARAMETER_TABLES[name])


# the parameter tables a design reads from the store it is pointed at: the hardware and how it
# is deployed (the workloads are the design's own question)
HARDWARE_TABLES = ("deployments", "deployment_mesh", "deployment_frameworks", "frameworks", "gpus", "dtypes")


def store_parameters(main_db: str | Path | None) -> dict[str, pa.Table] | None:
    """The :data:`HARDWARE_TABLES` of the store ``main_db`` (``archsql --db``: the deployments
    and GPUs added there with ``archsql deployment add`` / ``gpu add``), or None when there is
    no such store (the defaults of archsql/defaults and archsql/gpus then apply)."""
    import duckdb

    if main_db is None or not Path(main_db).is_file():
        return None
    con = duckdb.connect(str(main_db), read_only=True)
    try:
        present = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        out = {}
        for name in HARDWARE_TABLES:
            if name in present:
                columns = ", ".join(f'"{c}"' for c in PARAMETER_TABLES[name].names)
                table = con.sql(f'select {columns} from "{name}"').to_arrow_table()
                out[name] = table.cast(PARAMETER_TABLES[name])
        return out
    finally:
        con.close()


def default_parameters() -> dict[str, pa.Table]:
    """The :data:`HARDWARE_TABLES` as a new store gets them (archsql/defaults, archsql/gpus)."""
    from archsql.defaults import load_default
    from archsql.gpus import load_gpus

    return {name: load_gpus() if name == "gpus" else load_default(name) for name in HARDWARE_TABLES}


def with_deployment_copy(parameters: Mapping[str, pa.Table], row: Mapping[str, Any], like: str) -> dict[str, pa.Table]:
    """``parameters`` with ``row`` (a deployment: columns and mesh degrees by name) added as a
    copy of deployment ``like``: its framework row too, so its usable memory is the same."""
    columns = PARAMETER_TABLES["deployments"].names
    scalar, mesh = split_deployment(row, columns)
    out = dict(parameters)
    out["deployments"] = pa.concat_tables([out["deployments"], _param_table("deployments", [scalar])])
    out["deployment_mesh"] = pa.concat_tables([out["deployment_mesh"], _param_table("deployment_mesh", mesh)])
    frameworks = [
        {**r, "deployment": row["deployment"]}
        for r in out["deployment_frameworks"].to_pylist()
        if r["deployment"] == like
    ]
    out["deployment_frameworks"] = pa.concat_tables(
        [out["deployment_frameworks"], _param_table("deployment_frameworks", frameworks)]
    )
    return out


# the parameter tables whose rows belong to one deployment
_DEPLOYMENT_PARTS = ("deployments", "deployment_mesh", "deployment_frameworks")


def only_deployments(parameters: Mapping[str, pa.Table], names: Iterable[str]) -> dict[str, pa.Table]:
    """``parameters`` (:func:`store_parameters`) with only the deployments ``names`` (their
    mesh and framework rows too): the deployments a design reads.  Each deployment in the
    design store costs its derived rows for every model the store holds (the SOL and memory
    rows of ~20 default deployments were half of a design write); the GPUs, frameworks and
    dtypes stay whole."""
    import pyarrow.compute as pc

    keep = pa.array(sorted(set(names)), pa.string())
    out = dict(parameters)
    for name in _DEPLOYMENT_PARTS:
        if name in out:
            out[name] = out[name].filter(pc.is_in(out[name].column("deployment"), keep))
    return out


def deployment_rows(parameters: Mapping[str, pa.Table] | None) -> list[dict[str, Any]]:
    """The deployments of ``parameters`` (:func:`store_parameters`; None: the defaults), one
    mapping each: columns and the degrees of the mesh axes that are not 1."""
    if parameters is None or "deployments" not in parameters:
        return default_deployments()
    rows = {r["deployment"]: r for r in parameters["deployments"].to_pylist()}
    for m in parameters["deployment_mesh"].to_pylist():
        if m["deployment"] in rows:
            rows[m["deployment"]][m["axis"]] = m["degree"]
    return list(rows.values())


def default_deployments() -> list[dict[str, Any]]:
    """The default deployments (archsql/defaults), one mapping each: columns and the
    degrees of the mesh axes that are not 1."""
    from archsql.defaults import load_default

    rows = {r["deployment"]: r for r in load_default("deployments").to_pylist()}
    for m in load_default("deployment_mesh").to_pylist():
        rows[m["deployment"]][m["axis"]] = m["degree"]
    return list(rows.values())


def check_gpu(gpu: str, parameters: Mapping[str, pa.Table] | None = None) -> str:
    """``gpu`` when it is a GPU of ``parameters`` (:func:`store_parameters`), else of
    archsql/gpus/gpus.csv; otherwise a DesignError with the closest name."""
    from archsql.gpus import load_gpus

    table = parameters["gpus"] if parameters and "gpus" in parameters else load_gpus()
    names = table.column("gpu").to_pylist()
    if gpu not in names:
        where = "the gpus table (archsql gpu list; archsql gpu add adds one)"
        raise DesignError(
            f"unknown GPU '{gpu}'",
            [Issue(f"GPUs are the rows of {where}", hint=did_you_mean(gpu, names) or ", ".join(names))],
        )
    return gpu


def check_dtype(dtype: str) -> str:
    from archsql.defaults import load_default

    names = load_default("dtypes").column("dtype").to_pylist()
    if dtype not in names:
        raise DesignError(
            f"unknown dtype '{dtype}'", [Issue(f"known dtypes: {', '.join(names)}", hint=did_you_mean(dtype, names))]
        )
    return dtype


def append_rows(db: str | Path, table: str, rows: pa.Table, replace: bool = False) -> None:
    """Create ``table`` in the design store when absent (or, with ``replace``, anew) and
    append ``rows``: design facts that are not evaluated tables (probes, audit cards)."""
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.begin()
        alias = f"__design_{table}"
        con.register(alias, rows)
        if replace:
            con.execute(f'drop table if exists "{table}"')
        con.execute(f'create table if not exists "{table}" as select * from "{alias}" limit 0')
        con.execute(f'insert into "{table}" select * from "{alias}"')
        con.unregister(alias)
        con.commit()
    finally:
        con.close()


def write_record(
    db: str | Path, tables: Mapping[str, tuple[pa.Table, tuple[str, ...]]], record: Mapping[str, object]
) -> None:
    """Write one design record (an edit: its row, ledger and graph diff) into the design store
    in one transaction: each table ``name -> (rows, primary key)`` is created with its key when
    absent, and the rows of an earlier record of the same ``record`` (column -> value) replaced."""
    import duckdb

    from archsql.store import write_record as write_keyed

    con = duckdb.connect(str(db))
    try:
        con.begin()
        for name, (rows, key) in tables.items():
            write_keyed(con, name, rows, key, record)
        con.commit()
    finally:
        con.close()


def create_view(db: str | Path, name: str) -> None:
    """(Re)create the design view ``archsql/design/sql/views/<name>.sql`` in the store."""
    import duckdb

    sql = (SQL_DIR / "views" / f"{name}.sql").read_text(encoding="utf-8").rstrip().removesuffix(";")
    con = duckdb.connect(str(db))
    try:
        con.execute(f'create or replace view "{name}" as\n{sql}')
    finally:
        con.close()


# ---------------------------------------------------------------------------- reading


def read(db: str | Path, name: str, params: Mapping[str, Any] | None = None) -> pa.Table:
    """Run the saved design query ``archsql/design/sql/<name>.sql`` (named parameters
    ``$name``) against the design store; an Arrow table."""
    sql = (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")
    return query(db, sql, params)


def query(db: str | Path, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
    from archsql.store import connect

    con = connect(db, read_only=True)
    try:
        return con.sql(sql, params=dict(params or {})).to_arrow_table()
    finally:
        con.close()


__all__ = [
    "DEFAULT_DESIGN_DB",
    "append_rows",
    "check_dtype",
    "check_gpu",
    "create_view",
    "decode_workload",
    "default_deployments",
    "default_parameters",
    "deployment_rows",
    "design_db",
    "only_deployments",
    "parse_contexts",
    "parse_tokens",
    "prefill_workload",
    "query",
    "read",
    "read_views",
    "store_parameters",
    "token_label",
    "workload_rows",
    "write",
    "write_record",
]
