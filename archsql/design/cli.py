"""``archsql compare | edit | diff | audit``: the design commands (registered in archsql/cli.py).

Thin shells over :mod:`archsql.design`; every number printed is a row the design module
read from the store's views.  Design commands write to the design store (``--store``,
default ``$ARCHSQL_DESIGN_DB`` or ``./archsql-design.duckdb``), never to the main store.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pyarrow as pa

from archsql.errors import EXIT_VERDICT
from archsql.output import check_format, console, emit, human, human_bytes
from archsql.output import delta as signed
from archsql.schema.tables import PHASES

_STORE_OPTION = click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Design store [default: $ARCHSQL_DESIGN_DB or ./archsql-design.duckdb].",
)
_FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "csv", "json", "parquet")),
    default="table",
    show_default=True,
    help="table: a terminal view; csv/json/parquet: the rows (Arrow) for other tools.",
)
_OUTPUT_OPTION = click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write csv/json/parquet rows to this file (required for parquet).",
)


def _rows_out(table: pa.Table, fmt: str, output: Path | None) -> None:
    check_format(fmt, output)
    emit(table, fmt, output)


def _ms(seconds: float | None) -> str:
    """Seconds as '0.218 ms', '53.7 ms' or '4.74 s'."""
    if seconds is None:
        return "—"
    if abs(seconds) >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms"


# ---------------------------------------------------------------------------- compare


@click.command("compare")
@click.argument("slot")
@click.option(
    "--component",
    "-C",
    "components",
    multiple=True,
    required=True,
    help="NAME@MODEL[:TEMPLATE][[dim=value,…]]: a component bound with MODEL's dims (repeat).",
)
@click.option("--d-model", type=click.IntRange(min=1), required=True, help="Contract d_model shared by every probe.")
@click.option("--context", "contexts", default="2k,32k,128k", show_default=True, help="Contexts (k = 1024 tokens).")
@click.option("-B", "--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Requests per step.")
@click.option(
    "--gpu",
    default="H200 SXM",
    show_default=True,
    help="GPU of the one-GPU contract deployment (a GPU of the store, --db: `archsql gpu list`).",
)
@click.option("--dtype", default="bf16", show_default=True, help="Weights, activations and caches.")
@click.option(
    "--specs-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where probe YAML go."
)
@_STORE_OPTION
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def compare_cmd(db, slot, components, d_model, contexts, batch, gpu, dtype, specs_dir, store, fmt, output) -> None:
    """Compare components for SLOT under one contract (one-layer probes, same engine).

    Example: archsql compare attention -C gqa_attention@Meta-Llama-3.1-8B -C mla_attention@DeepSeek-V3
    -C gated_deltanet@Qwen3.5-27B --d-model 4096 --context 2k,32k,128k
    """
    from archsql.design.compare import compare_components

    result = compare_components(
        slot,
        list(components),
        d_model=d_model,
        contexts=contexts,
        batch=batch,
        gpu=gpu,
        dtype=dtype,
        db=store,
        specs_dir=specs_dir,
        main_db=db,
    )
    if fmt != "table":
        _rows_out(result.table, fmt, output)
        return
    from rich.table import Table

    c = result.contract
    rows = result.table.to_pylist()
    ctx = list(dict.fromkeys(r["context"] for r in rows))
    title = (
        f"{slot}: {len(result.probes)} components at d_model {c.d_model}, batch {c.batch}, {c.dtype}, 1× {c.gpu}"
        " (per layer)"
    )
    table = Table(title=title, header_style="bold")
    for name in ("component", "from", "role", "params", "weights", "cache growth", "cache/token"):
        table.add_column(name, justify="left" if name in ("component", "from", "role", "cache growth") else "right")
    from archsql.design.store import token_label

    for n in ctx:
        table.add_column(f"prefill {token_label(n)}", justify="right")
        table.add_column(f"cache/req {token_label(n)}", justify="right")
    for probe in result.probes:
        mine = [r for r in rows if r["model"] == probe.model]
        first = mine[0]
        origin = probe.ref.origin + (f":{first['origin_template']}" if first["origin_template"] else "")
        growth = human_bytes(first["cache_bytes_per_token"]) if first["cache_bytes_per_token"] else "0"
        if first["state_bytes_per_request"]:
            growth += f" + {human_bytes(first['state_bytes_per_request'])} state"
        cells = [
            probe.ref.component
            + ("[" + ",".join(f"{k}={v}" for k, v in probe.ref.dims) + "]" if probe.ref.dims else ""),
            origin,
            first["role"],
            human(first["params_per_layer"]),
            human_bytes(first["weight_bytes_per_layer"]),
            first["cache_growth"],
            growth,
        ]
        for n in ctx:
            r = next(r for r in mine if r["context"] == n)
            cells += [_ms(r["prefill_time_s"]), human_bytes(r["cache_bytes_per_request"])]
        table.add_row(*cells)
    out = console()
    out.print(table)
    out.print(
        f"rows: view component_comparison in {result.db} "
        f'(archsql --db {result.db} sql "select * from component_comparison"), kept as design_comparison '
        f"(archsql site --design-store shows it); probes in {result.probes[0].spec_file.parent}",
        markup=False,
    )


# ---------------------------------------------------------------------------- edit


def _parse_swap(text: str):
    from archsql.design.edit import Swap

    spec, _, templates = text.partition("@")
    chosen = tuple(t.strip() for t in templates.split(",") if t.strip()) or None
    return Swap.parse(spec, chosen)


@click.command("edit")
@click.argument("model")
@click.option(
    "--swap",
    "swaps",
    multiple=True,
    help="SLOT=COMPONENT[@TEMPLATE,…]: fill SLOT (in those layer groups; default all).",
)
@click.option("--set", "set_dims", multiple=True, help="DIM=VALUE: bind a dim (a number or config.<key>); repeat.")
@click.option("--dims-from", default=None, help="Bind dims the edit still lacks from this model's config.")
@click.option("--name", default=None, help="Name of the derived model [default: MODEL+component…].")
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("designs"), show_default=True
)
@click.option("--context", default="64k", show_default=True, help="Context of the prefill FLOPs, KV and SOL rows.")
@click.option("-B", "--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--dtype",
    default=None,
    help="KV-cache dtype of every row, device memory included [default: the deployment's kv_dtype].",
)
@click.option(
    "--deployment",
    default=None,
    help="Deployment of the SOL and device-memory rows, a deployment of the store (--db: `archsql deployment "
    "list`) [default: 8xH200-tp8-ep8]; weight bytes are in its weight profile.",
)
@_STORE_OPTION
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def edit_cmd(
    db, model, swaps, set_dims, dims_from, name, out_dir, context, batch, dtype, deployment, store, fmt, output
) -> None:
    """Swap components / set dims in MODEL, save the derived YAML, print every layer group old → new.

    Example: archsql edit DeepSeek-V3 --swap attention=mla_dsa_attention --dims-from DeepSeek-V3.2
    """
    from archsql.design.edit import DEFAULT_DEPLOYMENT, edit_model
    from archsql.design.specs import parse_assignments

    report = edit_model(
        model,
        swaps=[_parse_swap(s) for s in swaps],
        set_dims=parse_assignments(set_dims),
        dims_from=dims_from,
        name=name,
        out_dir=out_dir,
        context=context,
        batch=batch,
        dtype=dtype,
        deployment=deployment or DEFAULT_DEPLOYMENT,
        db=store,
        main_db=db,
    )
    if fmt != "table":
        _rows_out(report.ledger, fmt, output)
        return
    from rich.table import Table
    from rich.text import Text

    from archsql.design.store import token_label

    d = report.derived
    out = console()
    out.print(f"[bold]{d.name}[/bold] = {d.base} + edits → {d.path}")
    for where, (old, new) in d.swapped.items():
        out.print(f"  swap {where}: {old} → {new}", markup=False)
    for dim, source in d.provenance.items():
        out.print(f"  dim {dim}: {source}", markup=False)
    if d.dims_dropped:
        out.print(f"  dropped (no node reads them now): {', '.join(d.dims_dropped)}", markup=False)
    table = Table(
        title=f"old → new (prefill and KV at {token_label(report.context)}, batch {report.batch}; weights "
        f"{report.weight_profile}, KV {report.dtype}; SOL and device memory on {report.deployment})",
        header_style="bold",
    )
    for column, justify in (
        ("group", "left"),
        ("layers", "right"),
        ("quantity", "left"),
        ("old", "right"),
        ("new", "right"),
        ("delta", "right"),
        ("ratio", "right"),
    ):
        table.add_column(column, justify=justify)
    last = None
    for r in report.ledger.to_pylist():
        group = "whole model" if r["scope"] == "model" else (r["template"] or "outside stacks")
        fmt_value = _formatter(r["unit"])
        layers = "" if r["layers_old"] is None and r["layers_new"] is None else _arrow(r["layers_old"], r["layers_new"])
        delta = r["delta"]
        style = "green" if delta < 0 else ("red" if delta > 0 else "")
        table.add_row(
            group if group != last else "",
            layers if group != last else "",
            r["quantity"],
            fmt_value(r["old"]),
            fmt_value(r["new"]),
            Text(signed(delta, fmt_value), style=style),
            "—" if r["ratio"] is None else f"{r['ratio']:.4g}",
        )
        last = group
    out.print(table)
    short = {
        side: r[side]
        for r in report.ledger.to_pylist()
        if r["quantity"] == "device_shortfall_bytes" and r["scope"] == "model"
        for side in ("old", "new")
        if r[side]
    }
    for side, value in short.items():  # never hidden in a column: a step that does not fit is said
        model_name = d.base if side == "old" else d.name
        out.print(
            Text(
                f"{side} ({model_name}) does not fit on {report.deployment}: {human_bytes(value)} short per device "
                f"at batch {report.batch}, context {token_label(report.context)}",
                style="bold red",
            )
        )
    out.print(
        f"rows in {report.db}, the edit recorded as '{d.name}' (design_edits, design_edit_ledger, design_edit_diff; "
        f"archsql site --design-store shows it); load the derived model with: archsql build {d.path}",
        markup=False,
    )


def _arrow(a, b) -> str:
    return str(a) if a == b else f"{a if a is not None else '—'} → {b if b is not None else '—'}"


def _formatter(unit: str):
    if unit == "s":
        return _ms
    if "bytes" in unit:
        return human_bytes
    return human


# ---------------------------------------------------------------------------- diff


@click.command("diff")
@click.argument("a")
@click.argument("b")
@click.option(
    "--phase", type=click.Choice(PHASES), default="prefill", show_default=True, help="decode: decode variants."
)
@click.option("--max-rows", type=click.IntRange(min=1), default=60, show_default=True, help="Rows shown in the table.")
@_FORMAT_OPTION
@_OUTPUT_OPTION
def diff_cmd(a, b, phase, max_rows, fmt, output) -> None:
    """Diff two components or two models: nodes paired by declaration path.

    Example: archsql diff mla_attention mla_dsa_attention
    """
    from archsql.design.diff import diff, render

    result = diff(a, b, phase=phase)
    if fmt != "table":
        _rows_out(result.table, fmt, output)
        return
    render(result, console(), max_rows=max_rows)


# ---------------------------------------------------------------------------- audit


@click.command("audit")
@click.argument("baseline")
@click.argument("candidate")
@click.option("--changed-field", default=None, help="The one structural field the candidate changes.")
@click.option(
    "--budget", "budgets", multiple=True, help="ITEM=LIMIT, largest allowed delta: params=+2%, kv_bytes_per_token=0."
)
@click.option("--evidence", "evidence", multiple=True, help="PATH[#sha256:HEX]: an evidence record (JSON); repeat.")
@click.option("--context", default="32k", show_default=True, help="Context of the KV-per-request ledger row.")
@click.option("--dtype", default="bf16", show_default=True, help="Cache dtype of the KV rows.")
@_STORE_OPTION
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
def audit_cmd(baseline, candidate, changed_field, budgets, evidence, context, dtype, store, fmt) -> None:
    """Audit CANDIDATE against BASELINE: single-variable check, ledgers, evidence, decision
    (exit code 1 when the decision is reject).

    Example: archsql audit Qwen3-8B Qwen3-32B --changed-field intermediate_size
    """
    from archsql.design.audit import audit, render

    card = audit(
        baseline,
        candidate,
        changed_field=changed_field,
        budgets=list(budgets),
        evidence=list(evidence),
        context=context,
        dtype=dtype,
        db=store,
    )
    if fmt == "json":
        tables = card.tables()
        payload = {name: table.to_pylist() for name, table in tables.items()}
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        render(card, console())
    if card.decision == "reject":  # a verdict, like validate's "not publishable"
        sys.exit(EXIT_VERDICT)


COMMANDS = (compare_cmd, edit_cmd, diff_cmd, audit_cmd)

__all__ = ["COMMANDS", "audit_cmd", "compare_cmd", "diff_cmd", "edit_cmd"]
