"""``archsql corpus …`` and ``archsql bench``: thin shells over the kernel-corpus API.

Registered on the main group in :mod:`archsql.cli`; the output helpers come from there
(imported when a command runs, so either module can be imported first).
"""

from __future__ import annotations

from pathlib import Path

import click

from archsql.errors import CorpusError
from archsql.output import check_format, console, emit, plural

_REJECTS_OPTION = click.option(
    "--rejects",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every rejected row (location, field, reason, value) to this CSV.",
)


def _print_providers(run) -> None:
    """Which providers ran (version, rows, failed checks) and which were skipped, and why."""
    from collections import Counter

    from rich.table import Table
    from rich.text import Text

    table = Table(title="providers", header_style="bold")
    for name in ("provider", "version", "status", "measured", "failed checks", "reason"):
        table.add_column(name)
    skipped = Counter((s.provider, s.reason) for s in run.skips)
    for p in run.providers:
        status = "used" if p.used and p.measured else ("no shape measured" if p.used else "skipped")
        reason = p.reason or "; ".join(f"{why} (×{n})" for (name, why), n in skipped.items() if name == p.name)
        table.add_row(p.name, p.version or "", status, str(p.measured), str(p.failed), Text(reason or ""))
    console().print(table)


@click.group()
def corpus() -> None:
    """The kernel corpus: measured kernel times with full workload signatures."""


@corpus.command("import")
@click.argument("source")
@click.argument("more", nargs=-1)
@click.option(
    "--systems",
    default=None,
    help="aiconfigurator: only these systems, comma-separated (h200_sxm,b200_sxm); default: all.",
)
@click.option(
    "--from",
    "location",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="aiconfigurator: a wheel (.whl) or unpacked folder instead of the installed package.",
)
@click.option("--source-name", default=None, help="Files: name the source (default: the file name).")
@_REJECTS_OPTION
@click.pass_obj
def import_(
    db: Path,
    source: str,
    more: tuple[str, ...],
    systems: str | None,
    location: Path | None,
    source_name: str | None,
    rejects: Path | None,
) -> None:
    """Import measurements: SOURCE is `aiconfigurator` or CSV / Parquet files.

    Rows are validated one by one: good rows are appended, bad rows rejected with their
    line (or row) and reason; a source already imported is skipped.
    """
    if source == "aiconfigurator":
        if more:
            raise click.UsageError("`corpus import aiconfigurator` takes no files (use --from PATH)")
        from archsql.kernel_corpus.aiconfigurator import import_aiconfigurator

        chosen = [s.strip() for s in systems.split(",") if s.strip()] if systems else None
        report = import_aiconfigurator(db, location=location, systems=chosen, rejects=rejects)
    else:
        if systems or location:
            raise click.UsageError("--systems and --from apply to `corpus import aiconfigurator`")
        from archsql.kernel_corpus.files import import_files

        report = import_files(db, [source, *more], source=source_name, rejects=rejects)
    _print_report(report)


def _print_report(report) -> None:
    from rich.table import Table
    from rich.text import Text

    out, err = console(), console(stderr=True)
    imported, skipped = report.imported, report.skipped
    table = Table(title=f"{plural(len(imported), 'source')} imported into {report.db}", header_style="bold")
    for name in ("rows read", "kept", "rejected", "already present"):
        table.add_column(name, justify="right")
    table.add_row(
        *(f"{report.total(a):,}" for a in ("rows_read", "rows_kept", "rows_rejected", "rows_already_present"))
    )
    out.print(table)
    if skipped:
        out.print(f"{plural(len(skipped), 'source')} skipped: already imported (same content)")
    if report.unmapped:
        out.print(f"tables without a mapping (not imported): {', '.join(report.unmapped)}")
    if report.reasons:
        reasons = Table(title="rejected rows by reason", header_style="bold")
        reasons.add_column("rows", justify="right")
        reasons.add_column("field")
        reasons.add_column("reason")
        for field, reason, n in report.reasons:
            reasons.add_row(f"{n:,}", field, Text(reason))
        err.print(reasons)
        for rejection in report.sample:
            err.print(Text(rejection.render()))
        more = report.total("rows_rejected") - len({(r.location, r.source_row) for r in report.sample})
        where = f"; all of them in {report.rejects_file}" if report.rejects_file else ""
        if more > 0:
            err.print(f"… and {more:,} more rejected rows in the table kernel_corpus_rejects{where}")
        elif where:
            err.print(f"rejected rows written to {report.rejects_file}")
    out.print(f"{report.seconds:.2f} s")


@corpus.command()
@click.option("--format", "fmt", type=click.Choice(("table", "csv", "json", "parquet")), default="table")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.pass_obj
def summary(db: Path, fmt: str, output: Path | None) -> None:
    """Measurements per GPU × op family × library × version (the view kernel_corpus_summary)."""
    from archsql import api
    from archsql.kernel_corpus.storage import connect_read_only

    connect_read_only(db).close()  # a store without a corpus says so
    check_format(fmt, output)
    emit(
        api.query("select * from kernel_corpus_summary order by gpu, op_family, library, library_version", db=db),
        fmt,
        output,
    )


@corpus.command()
@click.pass_obj
def sync(db: Path) -> None:
    """Make the store's sources and the corpus folder agree: register partition files the
    store does not know, unregister sources whose file is gone (import them again)."""
    from archsql.kernel_corpus.storage import corpus_dir
    from archsql.kernel_corpus.storage import sync as do_sync

    counts = do_sync(db)
    out = console()
    out.print(f"{counts['sources']} sources in {counts['files']} files registered from {corpus_dir(db)}")
    if counts["unregistered"]:
        out.print(
            f"{counts['unregistered']} sources unregistered: their partition files are missing; "
            "import them again to bring their rows back"
        )
    if counts["staging_removed"]:
        out.print(f"{counts['staging_removed']} staging folders of interrupted imports removed")


# the columns `corpus vs-sol` prints as a table (every column with --format csv/json/parquet)
_VS_SOL_COLUMNS = {
    False: ("workload", "uid", "op_kind", "m", "n", "k", "batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim",
            "tokens", "hidden", "message_bytes", "group_size", "launches", "sol_s", "measured_s", "measured_over_sol",
            "status", "library", "library_version", "kernel"),
    True: ("workload", "phase", "sol_s", "time_s", "measured_share", "measured_over_sol", "kernels_measured",
           "kernels_unmeasured", "kernels_without_signature", "ttft_s", "tpot_s", "measured_with"),
}  # fmt: skip


@corpus.command("vs-sol")
@click.argument("model")
@click.option("--deployment", default="1xH200-single", show_default=True, help="A deployments row.")
@click.option("--workload", "workloads", multiple=True, help="A workloads row (repeatable; default: every workload).")
@click.option("--framework", default=None, help="The framework's own newest kernels (vllm, sglang, trtllm, ...).")
@click.option("--envelope", is_flag=True, help="The fastest correct kernel of any library instead.")
@click.option("--step", is_flag=True, help="Step times (step_measured) instead of one row per kernel.")
@click.option("--format", "fmt", type=click.Choice(("table", "csv", "json", "parquet")), default="table")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.pass_obj
def vs_sol(
    db: Path,
    model: str,
    deployment: str,
    workloads: tuple[str, ...],
    framework: str | None,
    envelope: bool,
    step: bool,
    fmt: str,
    output: Path | None,
) -> None:
    """Measured kernel times next to speed of light for MODEL on a deployment (the views
    measured_vs_sol and step_measured): exact signature matches, SOL where none."""
    from archsql.kernel_corpus.measured import measured_vs_sol

    if envelope == (framework is not None):
        raise click.UsageError("choose a policy: --framework NAME (its own newest kernels) or --envelope")
    check_format(fmt, output)
    table = measured_vs_sol(db, model, deployment=deployment, workloads=workloads, framework=framework, step=step)
    if fmt == "table":
        table = table.select(list(_VS_SOL_COLUMNS[step]))
    emit(table, fmt, output)


@click.command()
@click.argument("model", required=False)
@click.option("--workload", "workload_name", default="decode_b1_c2k", show_default=True, help="A workloads row.")
@click.option(
    "--deployment",
    default="1xH200-single",
    show_default=True,
    help="A deployments row: plan the per-device shapes of its layout (tp 8: n / 8, ...).",
)
@click.option("--tiny", is_flag=True, help="Built-in tiny shapes of every measurable op kind (no model).")
@click.option("--dtype", default="fp32", show_default=True, type=click.Choice(("fp32", "bf16", "fp16", "fp8")))
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda, cuda:1, …")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0))
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--gpu", default=None, help="The gpus.gpu name of the device (default: from its driver name).")
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan, measure nothing.")
@click.option("--no-append", is_flag=True, help="Measure and print, but do not append to the corpus.")
@click.option(
    "--provider",
    "provider_names",
    multiple=True,
    help="Only these kernel providers (repeatable: flashinfer, flash-attn, deep-gemm); PyTorch eager always runs.",
)
@click.pass_obj
def bench(
    db: Path,
    model: str | None,
    workload_name: str,
    deployment: str,
    tiny: bool,
    dtype: str,
    device: str,
    warmup: int,
    repeats: int,
    gpu: str | None,
    plan_only: bool,
    no_append: bool,
    provider_names: tuple[str, ...],
) -> None:
    """Measure kernel shapes against their eager reference and append validated rows.

    MODEL: plan the unique kernel shapes one device runs in a step of the model (the
    kernel_plan view: --workload on --deployment, read through its layouts); or --tiny for
    built-in tiny shapes.  Every shape runs through PyTorch eager and through each optional
    library provider that is installed and suits the device; the providers used and skipped
    are listed with the reason.
    """
    from rich.table import Table

    from archsql.kernel_corpus import harness

    if tiny == (model is not None):
        raise click.UsageError("name a MODEL to plan from, or pass --tiny (not both)")
    if tiny:
        shapes = list(harness.TINY_SHAPES)
        title = "tiny shapes"
    else:
        from archsql.kernel_corpus.plan import plan

        planned = plan(model, workload_name, deployment, db=db)
        shapes = planned.shapes
        title = f"{model}, {workload_name} on {deployment}: {len(shapes)} unique shapes per device"
        if planned.unplanned:
            console(stderr=True).print(
                "not planned (no kernel op kind): " + ", ".join(f"{op} ×{n}" for op, n in planned.unplanned.items())
            )
        if not plan_only:
            shapes, skipped = _measurable(shapes)
            if skipped:
                console(stderr=True).print("not measured here: " + "; ".join(skipped))
    out = console()
    if plan_only:
        table = Table(title=title, header_style="bold")
        for name in ("op kind", "phase", "shape", "launches / step"):
            table.add_column(name)
        for s in shapes:
            table.add_row(s.op_kind, s.phase or "", s.describe(), str(s.count))
        out.print(table)
        return
    run = harness.bench(
        None if no_append else db,
        shapes,
        dtype=dtype,
        device=device,
        warmup=warmup,
        repeats=repeats,
        gpu=gpu,
        providers=list(provider_names) or None,
    )
    table = Table(title=f"{title} — {dtype} on {device} ({run.environment.get('device_name')})", header_style="bold")
    for name, justify in (("op kind", "left"), ("phase", "left"), ("shape", "left"), ("provider", "left"),
                          ("kernel", "left"), ("µs", "right"), ("error", "right"), ("check", "left")):  # fmt: skip
        table.add_column(name, justify=justify)
    for m in run.measurements:
        status = "passed" if m.passed else f"FAILED (> {m.tolerance:g})"
        table.add_row(m.shape.op_kind, m.shape.phase or "", m.shape.describe(), m.library, m.kernel,
                      f"{m.latency_us:.1f}", f"{m.check_error:.2e}", status)  # fmt: skip
    out.print(table)
    _print_providers(run)
    if run.report is not None:
        r = run.report
        out.print(
            f"appended {r.total('rows_kept')} of {r.total('rows_read')} rows to {r.db}"
            + (f"; {r.total('rows_rejected')} rejected" if r.total("rows_rejected") else "")
        )
        for rejection in r.sample:
            console(stderr=True).print(rejection.render(), markup=False)


def _measurable(shapes: list) -> tuple[list, list[str]]:
    """The planned shapes the harness can measure on one device, and why the others are
    skipped: op kinds without an eager reference (collectives, ...) and expert-parallel
    grouped GEMMs (the harness runs every expert of a shape on the one device)."""
    from archsql.kernel_corpus.harness import REFERENCES

    keep, skipped = [], []
    for s in shapes:
        if s.op_kind not in REFERENCES:
            skipped.append(f"{s.op_kind} {s.describe()} (no eager reference)")
        elif (s.get("ep") or 1) > 1:
            skipped.append(f"{s.op_kind} {s.describe()} (expert parallel: one device runs ep = 1 only)")
        else:
            keep.append(s)
    return keep, skipped


__all__ = ["CorpusError", "bench", "corpus"]
