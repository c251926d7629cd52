"""The ``archsql`` command line: build the store, query it, export it, explain a number.

Every command is a thin shell over :mod:`archsql.api`; numbers come from the store's
views or from :func:`archsql.api.explain`, never recomputed here.  Every command runs under
one exit-code contract (:func:`archsql.output.report_errors`): 0 ok, 1 a verdict ("not
publishable", "reject"), 2 a user error printed without a traceback, 3 an internal error
(a short message; the traceback goes to a log file whose path is printed).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import pyarrow as pa

from archsql import __version__, api
from archsql.cli_params import COMMANDS as PARAMETER_COMMANDS
from archsql.errors import EXIT_VERDICT
from archsql.output import (
    check_format,
    console,
    emit,
    format_option,
    human,
    output_option,
    plural,
    printable,
    progress_bar,
    report_errors,
)
from archsql.schema.tables import PHASES

# `archsql build` prints the saved query archsql/queries/summary.sql.
SUMMARY_QUERY = "summary"


# ---------------------------------------------------------------------------- the group


# Commands of the packages above the core (design tools, kernel corpus), by name: their
# modules load when one of them runs (or `--help` lists them), so a query starts quickly.
LAZY_COMMANDS = {
    "corpus": ("archsql.kernel_corpus.cli", "corpus"),  # archsql corpus import | summary | sync
    "bench": ("archsql.kernel_corpus.cli", "bench"),
    "compare": ("archsql.design.cli", "compare_cmd"),  # archsql compare | edit | diff | audit
    "edit": ("archsql.design.cli", "edit_cmd"),
    "diff": ("archsql.design.cli", "diff_cmd"),
    "audit": ("archsql.design.cli", "audit_cmd"),
    "site": ("archsql.site.cli", "site_cmd"),  # archsql site: the static site (archsql/site/)
    "report": ("archsql.site.cli", "report_cmd"),  # archsql report MODEL --deployment D: one file to share
    "kernels": ("archsql.launch_cli", "kernels_cmd"),  # archsql kernels MODEL --framework vllm@0.11 ...
    "author": ("archsql.author.cli", "author_cmd"),  # archsql author DIR --agent CMD | promote DRAFT --to DIR
    "promote": ("archsql.author.cli", "promote_cmd"),
}


class _Group(click.Group):
    """Runs every command under the exit-code contract (:func:`archsql.output.report_errors`)."""

    def invoke(self, ctx: click.Context) -> Any:
        return report_errors(ctx, lambda: super(_Group, self).invoke(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            import importlib

            module, attr = LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module), attr)
            accept_db_after(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The DuckDB store [default: $ARCHSQL_DB or ./archsql.duckdb]; also accepted after the subcommand.",
)
@click.version_option(__version__, prog_name="archsql")
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """archsql: LLM architecture specs evaluated once into DuckDB; every cost question is SQL."""
    from archsql.store import register_stale_notice
    from archsql.store_hold import release

    register_stale_notice(_stale_notice)
    # a command is one use of the store: the read-only connection api.query holds for the next
    # query (archsql.store_hold) is closed when it ends, not held into what runs after it
    ctx.call_on_close(release)
    ctx.obj = db if db is not None else api.default_db()


_NOTICED: set[Path] = set()


def _stale_notice(path: Path, state: Any) -> None:
    """Say once per store on stderr that its derived tables do not match its tables."""
    if path in _NOTICED:
        return
    _NOTICED.add(path)
    why = "were never computed" if state.recorded is None else "do not match its parameter tables"
    console(stderr=True).print(
        f"note: the derived tables of {path} {why}: reading the live views (slower); "
        "run `archsql refresh` to compute them again",
        highlight=False,
    )


# ---------------------------------------------------------------------------- build


_FORMAT_OPTION = format_option()
_OUTPUT_OPTION = output_option()


@cli.command()
@click.argument("models", nargs=-1)
@click.option(
    "--specs",
    "specs",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder of your own model .yaml files (and components/): its models build by name, all of them "
    "when no MODELS are named; a spec's config: path is read relative to the spec file.",
)
@click.option(
    "--replace-catalog",
    is_flag=True,
    help="Let a model .yaml named like a catalog model replace that model's rows.",
)
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def build(
    db: Path, models: tuple[str, ...], specs: Path | None, replace_catalog: bool, fmt: str, output: Path | None
) -> None:
    """Evaluate models into the store and print the summary.

    MODELS are catalog names, names of models in --specs DIR, or paths to model .yaml files;
    default: the whole catalog (with --specs: every model of DIR).  Config keys a spec does
    not read are named on stderr as warnings.
    """
    from rich.markup import escape

    from archsql.specs import default_library

    check_format(fmt, output)
    if specs is not None:
        library = api.user_library(specs)
        names = list(dict.fromkeys(models)) or api.user_models(specs)
    else:
        library = default_library()
        names = list(dict.fromkeys(models)) or api.catalog()
    for name in names:  # an unknown name fails before any work, with a "did you mean"
        library.model_path(name)
    err = console(stderr=True)
    with progress_bar(err, 28) as bar:
        task = bar.add_task("evaluating", total=len(names))

        def step(model: str) -> None:
            bar.advance(task)
            if bar.tasks[0].completed > bar.tasks[0].total:  # a repair evaluates the store's other models too
                bar.update(task, total=bar.tasks[0].completed)
            done = bar.tasks[0].completed == len(names)
            bar.update(
                task,
                description="writing the store and its derived tables"
                if done
                else f"evaluated {escape(printable(model))}",
            )

        report = api.build(names, db=db, progress=step, replace_catalog=replace_catalog, specs=specs)
    from rich.text import Text

    for issue in report.warnings:
        err.print(Text(printable("warning: " + issue.render(), newlines=True), style="yellow"))
    from archsql import queries

    summary = queries.run(SUMMARY_QUERY, db=report.db)
    built = set(report.models)
    shown = summary.filter([m in built for m in summary.column("model").to_pylist()])
    emit(shown, fmt, output, title=f"{plural(shown.num_rows, 'model')} in {report.db}")
    others = summary.num_rows - shown.num_rows
    note = f" (the store also holds {plural(others, 'other model')})" if others else ""
    click.echo(f"built {plural(len(report.models), 'model')} in {report.seconds:.2f} s{note}", err=fmt != "table")
    if report.repaired:
        click.echo(
            f"repaired the store: evaluated again {plural(len(report.repaired), 'model')} it holds "
            f"({printable(', '.join(report.repaired))})",
            err=True,
        )
    for line in report.notes:
        click.echo(f"migrated {printable(line)}", err=True)


@cli.command()
@click.pass_obj
def refresh(db: Path) -> None:
    """Compute the store's derived tables again.

    Queries read the rows of the store's views from its derived tables while these match
    its tables (a fingerprint of the parameter tables, the build and the view SQL); after a
    change made outside archsql (SQL on the file) they read the live views, which are always
    current but slower, until this command (or `archsql build`) computes them again.
    """
    import time

    t0 = time.perf_counter()
    names = api.refresh(db)
    console().print(f"computed {plural(len(names), 'derived table')} of {db} in {time.perf_counter() - t0:.2f} s")


# ---------------------------------------------------------------------------- sql


_ENGINE_OPTION = click.option(
    "--engine",
    type=click.Choice(("duckdb", "spark")),
    default="duckdb",
    show_default=True,
    help="spark: the same views on Apache Spark over a Parquet dataset (--dataset; pip install 'archsql[spark]').",
)
_DATASET_OPTION = click.option(
    "--dataset",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --engine spark: the folder `archsql export --parquet DIR --partition-by model` wrote.",
)


def _dataset_of(engine: str, dataset: Path | None) -> Path | None:
    if engine == "spark" and dataset is None:
        raise click.UsageError(
            "--engine spark reads a Parquet dataset: write one with `archsql export --parquet DIR "
            "--partition-by model`, then pass --dataset DIR"
        )
    if engine == "duckdb" and dataset is not None:
        raise click.UsageError("--dataset is read by --engine spark; DuckDB reads the store (--db)")
    return dataset


@cli.command()
@click.argument("query")
@_ENGINE_OPTION
@_DATASET_OPTION
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def sql(db: Path, query: str, engine: str, dataset: Path | None, fmt: str, output: Path | None) -> None:
    """Run a read-only QUERY over the store's tables and views (DuckDB's SQL dialect, on
    either engine)."""
    check_format(fmt, output)
    if _dataset_of(engine, dataset) is not None:
        from archsql.spark import engine as spark_engine

        emit(spark_engine.query(query, dataset), fmt, output)
        return
    from archsql import queries
    from archsql.errors import QueryError

    try:
        table, invalid = api.query_checked(query, db=db)  # one connection for both
    except QueryError:
        missing = queries.missing_parts(query, db)  # a part only some stores hold: say which, and how to add it
        if not missing:
            raise
        raise queries.missing_part_error("the query", missing, db) from None
    emit(table, fmt, output)
    _warn_invalid_rows(db, rows=invalid)


@cli.command("query")
@click.argument("name", required=False)
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def saved_query(db: Path, name: str | None, fmt: str, output: Path | None) -> None:
    """Run a saved query (archsql/queries/NAME.sql); without NAME, list them."""
    from archsql import queries

    check_format(fmt, output)
    if name is None:
        listing = queries.saved()
        emit(pa.table({"query": list(listing), "description": list(listing.values())}), fmt, output)
        return
    emit(queries.run(name, db=db), fmt, output)
    _warn_invalid_rows(db)


def _warn_invalid_rows(db: Path, shown: int = 5, *, rows: list[dict] | None = None) -> None:
    """On stderr: the parameter rows the views leave out (parameter_checks; ``rows`` when
    already read), so an answer without them is never silent."""
    rows = api.invalid_parameter_rows(db) if rows is None else rows
    if not rows:
        return
    from rich.text import Text

    err = console(stderr=True)
    names = sorted({(r["parameter_table"], r["row_key"]) for r in rows})
    err.print(
        Text(
            f"warning: {plural(len(names), 'parameter row')} left out of every answer "
            '(archsql sql "select * from parameter_checks"):',
            style="yellow",
        )
    )
    for r in rows[:shown]:
        line = f"  {r['parameter_table']} {r['row_key']!r}: invalid: {r['problem']} ({r['fix']})"
        err.print(Text(printable(line)))  # row names are the user's: control characters escaped
    if len(rows) > shown:
        err.print(Text(f"  … and {len(rows) - shown} more"))


# ---------------------------------------------------------------------------- export


@cli.command()
@click.option(
    "--parquet",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write <name>.parquet into (created if missing).",
)
@click.option(
    "--partition-by",
    "partition_by",
    multiple=True,
    help="Write the store's tables as a partitioned dataset another engine reads (DIR/<table>/<column>=<value>/, "
    "DIR/manifest.json), e.g. --partition-by model.",
)
@format_option(("table", "csv", "json"))
@click.pass_obj
def export(db: Path, directory: Path, partition_by: tuple[str, ...], fmt: str) -> None:
    """Write every table and view of the store as DIR/<name>.parquet, or (--partition-by) its
    tables as a partitioned Parquet dataset with a manifest (archsql sql --engine spark)."""
    from rich.markup import escape

    err = console(stderr=True)
    with progress_bar(err, 36) as bar:
        task = bar.add_task("exporting", total=None)

        def step(name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"wrote {escape(printable(name))}.parquet")

        if partition_by:
            from archsql.spark.dataset import export_dataset

            files = export_dataset(directory, db, partition_by, progress=step)
        else:
            files = api.export_parquet(directory, db=db, progress=step)
    emit(files, fmt, None, title=f"{files.num_rows} {'tables' if partition_by else 'files'} in {directory}")


# ---------------------------------------------------------------------------- explain


@cli.command()
@click.argument("model")
@click.argument("quantity", default="flops")
@click.option("--node", default=None, help="Only nodes whose uid ends with NODE (e.g. q_proj).")
@click.option("--phase", type=click.Choice(PHASES), default="prefill", show_default=True)
@click.option(
    "-B", "--batch", type=click.IntRange(min=1), default=1, show_default=True, help="B: requests in the step."
)
@click.option(
    "-s",
    "--new-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="s: new tokens per request [default: 2048 in prefill, 1 in decode].",
)
@click.option(
    "-c",
    "--context",
    type=click.IntRange(min=1),
    default=None,
    help="c: tokens attended after the step [default: s in prefill, 2048 in decode].",
)
@click.option(
    "-v",
    "--image-patches",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="v: image patches per request (a vision tower's input).",
)
@click.option(
    "--framework",
    default=None,
    help="With --deployment: also the kernel this framework launches each node in (name@version, e.g. vllm@0.11).",
)
@click.option("--deployment", default=None, help="A deployment of the store, for --framework.")
@click.pass_obj
def explain(
    db: Path,
    model: str,
    quantity: str,
    node: str | None,
    phase: str,
    batch: int,
    new_tokens: int | None,
    context: int | None,
    image_patches: int,
    framework: str | None,
    deployment: str | None,
) -> None:
    """Print the formula and value of a model quantity.

    QUANTITY: flops (default), params, active_params or cache_elements (a batch of B requests at context c).
    MODEL: a catalog name or a path to a model .yaml.  With --framework and --deployment, the
    kernels the framework launches the nodes in follow, each with its fused members (read from
    the store's launched_kernels view, as `archsql kernels` prints them).
    """
    if (framework is None) != (deployment is None):
        raise click.UsageError("--framework and --deployment go together")
    e = api.explain(
        model,
        quantity,
        node=node,
        phase=phase,
        batch=batch,
        new_tokens=new_tokens,
        context=context,
        image_patches=image_patches,
    )
    out = console()
    scope = f" of nodes ending in '{e.node}'" if e.node else ""
    where = f", {e.phase}" if e.phase else ""
    out.print(f"[bold]{e.model}[/bold]: {e.quantity}{scope}{where}")
    out.print(f"  formula   {e.formula}", markup=False)
    out.print(f"  bound     {e.bound}", markup=False)
    if e.phase is not None:
        out.print("  workload  " + ", ".join(f"{k} = {v}" for k, v in e.workload.items()), markup=False)
    else:
        out.print("  workload  (does not depend on the workload)", markup=False)
    value = f"{e.value:.0f}" if e.value.is_integer() else f"{e.value:g}"
    out.print(f"  value     {value}  ({human(e.value)})", markup=False)
    if framework is not None:
        from archsql.launch import launched

        launch = launched(db, e.model, framework=framework, deployment=deployment, phase=phase)
        rows = [r for r in launch.kernels.to_pylist() if not e.node or any(m.endswith(e.node) for m in r["members"])]
        out.print(
            f"  kernels   {launch.framework} {launch.version} on {launch.deployment} ({launch.workload}): "
            f"{len(rows)} launched kernel(s) run these nodes",
            markup=False,
        )
        for r in rows:
            how = f"fused by {r['rule']}" if r["rule"] else "launched alone"
            out.print(f"    {r['kernel']} ({how}): {' + '.join(r['members'])}", markup=False)


# ---------------------------------------------------------------------------- models


@cli.command()
@_FORMAT_OPTION
@_OUTPUT_OPTION
def models(fmt: str, output: Path | None) -> None:
    """List the bundled catalog of models (the table: name and description; csv/json/parquet
    add the Hub id and the spec file)."""
    from archsql.specs import default_library

    check_format(fmt, output)
    library = default_library()
    rows = []
    for name in api.catalog():
        spec = library.model(name)
        doc = " ".join(spec.doc.split())
        rows.append({"model": name, "hf_id": spec.hf_id, "spec_file": Path(spec.file).name, "description": doc})
    schema = pa.schema([(c, pa.string()) for c in ("model", "hf_id", "spec_file", "description")])
    table = pa.Table.from_pylist(rows, schema=schema)
    emit(table.select(["model", "description"]) if fmt == "table" else table, fmt, output)


# ---------------------------------------------------------------------------- checkpoints

NOT_PUBLISHABLE = EXIT_VERDICT


@cli.command()
@click.argument("model")
@click.option("--checkpoint", "checkpoint", default=None, help="A local checkpoint: .safetensors, shard set, folder.")
@click.option("--hub", "hub_id", default=None, help="A Hub repo id (org/name[@revision]); headers only.")
@click.option("--offline", is_flag=True, help="Read --hub from the local Hugging Face cache only.")
@click.option("--profile", default=None, help="Reconcile a precision profile (archsql/specs/quant/profiles).")
@click.option("--max-shown", type=click.IntRange(min=1), default=20, show_default=True, help="Errors shown per guard.")
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="The model's forward source: its modeling file or a folder holding it (repeatable); runs the source guard.",
)
def validate(
    model: str,
    checkpoint: str | None,
    hub_id: str | None,
    offline: bool,
    profile: str | None,
    max_shown: int,
    sources: tuple[Path, ...],
) -> None:
    """Check MODEL's spec (and reconcile a checkpoint with it); exit code 1 when not publishable.

    Guards: analysis (the spec evaluates), shape (tensors join), packing (storage rules, dtypes
    and packed element counts), weight (every checkpoint tensor claimed, matched, totals),
    source (with --source: every stream src anchor still in the forward source).
    """
    from archsql.publish_check import GUARDS, architecture_warnings
    from archsql.publish_check import validate as run_validate

    if checkpoint and hub_id:
        raise click.UsageError("give --checkpoint or --hub, not both")
    noticed: list = []
    errors = run_validate(
        model,
        checkpoint or hub_id,
        offline=offline,
        profile=profile,
        sources=list(sources) if sources else None,
        warnings=noticed,
    )
    for issue in [*architecture_warnings(model), *noticed]:
        console(stderr=True).print("warning: " + issue.render(), markup=False, highlight=False)
    out = console()
    if not errors:
        against = f" against {checkpoint or hub_id}" if (checkpoint or hub_id) else ""
        out.print(f"{model}: publishable — no errors{against}", markup=False)
        return
    for guard in GUARDS:
        found = [e for e in errors if e.guard == guard]
        if not found:
            continue
        out.print(f"[bold]{guard}[/bold]: {plural(len(found), 'error')}")
        for e in found[:max_shown]:
            out.print("  " + e.render().replace("\n", "\n  "), markup=False, highlight=False)
        if len(found) > max_shown:
            out.print(f"  … and {len(found) - max_shown} more {guard} errors", markup=False)
    out.print(f"{model}: not publishable ({plural(len(errors), 'error')})", markup=False)
    sys.exit(NOT_PUBLISHABLE)


@cli.command("checkpoint")
@click.argument("source")
@click.option("--offline", is_flag=True, help="Read a repo id from the local Hugging Face cache only.")
@click.option("--revision", default=None, help="Revision of a repo id or repo cache folder.")
@_FORMAT_OPTION
@_OUTPUT_OPTION
def checkpoint_headers(source: str, offline: bool, revision: str | None, fmt: str, output: Path | None) -> None:
    """Print the tensor headers of a checkpoint (checkpoint_tensors; no weight bytes read).

    SOURCE: a .safetensors or .gguf file, a shard set or folder, a Hugging Face cache folder,
    or a Hub repo id (org/name[@revision]).
    """
    from archsql.ingest import read_checkpoint

    check_format(fmt, output)
    emit(read_checkpoint(source, offline=offline, revision=revision), fmt, output)


# ---------------------------------------------------------------------------- sweep


def _ints(text: str) -> list[int]:
    """'1,8,64' or '8k,32k' → integers (k = 1024)."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        try:
            out.append(int(part[:-1]) * 1024 if part.endswith("k") else int(part))
        except ValueError:
            raise click.BadParameter(f"{part!r} is not an integer (use e.g. 1,8 or 8k,32k)") from None
    return out


def _mesh_axis_options(command):
    """One option per swept mesh axis (archsql.schema.parallel.MESH_AXES): --tp, --ep, ..."""
    from archsql.schema.parallel import MESH_AXES, SWEPT_AXES

    for axis in reversed(SWEPT_AXES):
        fills = [
            f"{a.name} = count / ({'·'.join(b.name for b in SWEPT_AXES if a.fills in b.spans)})"
            for a in MESH_AXES
            if a.fills is not None and a.fills in axis.spans
        ]
        help_text = f"Degrees of {axis.name}: {axis.shards}" + (f" ({'; '.join(fills)})." if fills else ".")
        option = click.option(
            f"--{axis.name.replace('_', '-')}",
            f"mesh_{axis.name}",
            default=axis.sweep,
            show_default=True,
            help=help_text,
        )
        command = option(command)
    return command


@cli.command()
@click.argument("model")
@click.option("--gpus", "gpu_names", default="H200 SXM", show_default=True, help="GPU names (gpus.gpu), ';'-separated.")
@click.option("--count", default="8", show_default=True, help="GPUs per deployment, e.g. 8 or 8,16.")
@click.option(
    "--layout",
    "layout_texts",
    multiple=True,
    help="A layout to try: mesh axes with degrees, e.g. tp8,ep8 or tp4,dp2,ep8 (repeat; dp and moe_tp "
    "not given take what the GPU count leaves).  Replaces the product of --tp/--ep/--pp/--cp.",
)
@click.option(
    "--layouts",
    "layouts_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file of layouts, one per line (tp8,ep8), # comments allowed.",
)
@_mesh_axis_options
@click.option(
    "--cp-kind",
    "cp_kinds",
    default="ring",
    show_default=True,
    help="Context-parallel kinds tried for every cp > 1: ring, ulysses or 'ring,ulysses'.",
)
@click.option("--batch", default="1,16,64,256", show_default=True, help="Requests per step.")
@click.option("--context", default="8k,32k", show_default=True, help="Context lengths (k = 1024).")
@click.option(
    "--weights",
    default="bf16",
    show_default=True,
    help="Weight dtypes, ','-separated; stored as the precision profile of that name (fp4: nvfp4), scales "
    "included; native: as the checkpoint ships them (FP8 blocks, MXFP4, BF16, per model).",
)
@click.option("--kv", default="bf16", show_default=True, help="KV-cache dtypes, ','-separated.")
@click.option(
    "--memory-fraction",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.9,
    show_default=True,
    help="Share of each GPU's memory usable for weights, caches and activations (vLLM gpu_memory_utilization).",
)
@click.option(
    "--phase",
    type=click.Choice(("both", *PHASES)),
    default="both",
    show_default=True,
    help="both: a prefill (TTFT) and a decode step (TPOT) per point, in one row.",
)
@click.option(
    "--columns",
    default=None,
    help="Columns to show, ','-separated [default: the table shows layout, batch, context, fits, ttft_s, "
    "tpot_s, tokens/s per GPU and per user, max_batch; csv/json/parquet every column].",
)
@click.option(
    "--rank-by",
    type=click.Choice(("sol", "serving")),
    default="sol",
    show_default=True,
    help="serving: rank the layouts by serving estimates (docs/serving.md) — TTFT, TPOT and output tokens/s "
    "per GPU of --framework at each --concurrency for --isl/--osl — instead of SOL steps per batch × context.",
)
@click.option("--framework", "serving_framework", default=None, help="--rank-by serving: FRAMEWORK@VERSION.")
@click.option("--isl", type=click.IntRange(1), default=None, help="--rank-by serving: prompt tokens per request.")
@click.option("--osl", type=click.IntRange(1), default=None, help="--rank-by serving: output tokens per request.")
@click.option("--concurrency", default=None, help="--rank-by serving: client concurrencies, e.g. 1,8,64.")
@click.option(
    "--pareto",
    "only_pareto",
    is_flag=True,
    help="Only the fitting points no other point beats on both tokens/s/user and tokens/s/GPU.",
)
@click.option(
    "--save",
    "save_as",
    default=None,
    metavar="NAME",
    help="Keep every point in the store as sweep NAME of MODEL (tables sweeps, sweep_points; the same name "
    "again replaces it): the site's deployment explorer plots its Pareto frontier (saved query site_sweep_pareto).",
)
@_ENGINE_OPTION
@_DATASET_OPTION
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_context
def sweep(
    ctx,
    model,
    gpu_names,
    count,
    layout_texts,
    layouts_file,
    cp_kinds,
    batch,
    context,
    weights,
    kv,
    memory_fraction,
    phase,
    columns,
    rank_by,
    serving_framework,
    isl,
    osl,
    concurrency,
    only_pareto,
    save_as,
    engine,
    dataset,
    fmt,
    output,
    **degrees,
) -> None:
    """SOL time, tokens/s and memory of MODEL over a grid of layouts × batch × context.

    One row per point: TTFT (the prefill step of BATCH prompts of CONTEXT tokens) and TPOT
    (a decode step at that context), whether both fit, tokens/s per GPU and per user, and the
    largest batch that fits.  Grid points whose degrees do not divide the GPU count are
    dropped and named on stderr.  The grid lives only for the query (the store's tables are
    not changed).  Examples:

    archsql sweep DeepSeek-V3 --layout tp8,ep8 --layout dp8,ep8 --weights native --batch 1,64 --context 8k

    archsql sweep DeepSeek-V3 --gpus "H200 SXM;B200 (HGX/DGX B200)" --weights fp8 --pareto

    archsql sweep Meta-Llama-3.1-70B --count 16 --tp 8 --cp 1,2 --cp-kind ring,ulysses --pp 1,2 --phase prefill

    archsql sweep Meta-Llama-3.1-8B --count 1,2 --tp 1,2 --rank-by serving --framework vllm@0.12.0 --isl 1024
    --osl 1024 --concurrency 8,64
    """
    from archsql import sweep as sweeps

    check_format(fmt, output)
    _dataset_of(engine, dataset)
    kinds = [k.strip() for k in cp_kinds.split(",")]
    unknown = [k for k in kinds if k not in ("ring", "ulysses")]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is not a context-parallel kind (use ring, ulysses)", param_hint="--cp-kind"
        )
    given = [
        name.removeprefix("mesh_")
        for name in degrees
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]
    layouts = None
    if layout_texts or layouts_file:
        if given:
            raise click.UsageError(
                f"--{given[0].replace('_', '-')} sweeps the degrees of one axis; with --layout/--layouts "
                "write each layout whole (e.g. --layout tp8,ep8)"
            )
        layouts = [sweeps.parse_layout(t, where=f"--layout {t!r}") for t in layout_texts]
        if layouts_file is not None:
            layouts += sweeps.read_layouts(layouts_file)
    plan = sweeps.plan(
        [g.strip() for g in gpu_names.split(";")],
        _ints(count),
        _ints(batch),
        _ints(context),
        [w.strip() for w in weights.split(",")],
        [k.strip() for k in kv.split(",")],
        phase,
        memory_fraction,
        degrees=None if layouts is not None else {n.removeprefix("mesh_"): _ints(t) for n, t in degrees.items()},
        layouts=layouts,
        cp_kinds=kinds,
    )
    err = console(stderr=True)
    if plan.dropped and not plan.deployments:
        raise click.UsageError(
            "every grid point was dropped: "
            + "; ".join(str(d) for d in plan.dropped[:5])
            + (f"; … and {len(plan.dropped) - 5} more" if len(plan.dropped) > 5 else "")
        )
    if plan.dropped:
        from rich.text import Text

        err.print(Text(f"dropped {plural(len(plan.dropped), 'grid point')}:", style="yellow"))
        for d in plan.dropped:
            err.print(Text(f"  {printable(str(d))}"))
    if rank_by == "serving":
        for flag, value in (("--save", save_as), ("--pareto", only_pareto or None), ("--dataset", dataset)):
            if value is not None:
                raise click.UsageError(f"{flag} applies to SOL sweeps, not --rank-by serving")
        _serving_sweep(
            ctx, model, plan, serving_framework, isl, osl, concurrency, memory_fraction, columns, fmt, output
        )
        return
    if dataset is not None:
        from archsql.spark import engine as spark_engine

        rows = spark_engine.sweep(model, db_of(ctx), dataset, plan.deployments, plan.workloads)
    else:
        rows = sweeps.sweep(model, db_of(ctx), plan.deployments, plan.workloads)
    table = sweeps.points(rows, plan.labels)
    if save_as is not None:
        grid_options = ("count", "gpu_names", "layout_texts", "layouts_file", "cp_kinds", "batch", "context")
        grid_options += ("weights", "kv", "memory_fraction", "phase", *degrees)
        given_grid = " ".join(  # the grid as asked: the options given, as written
            f"{o.opts[-1]} {' '.join(map(str, v)) if isinstance(v, tuple) else v}"
            for o in ctx.command.params
            if o.name in grid_options
            and (v := ctx.params[o.name]) not in (None, ())
            and ctx.get_parameter_source(o.name) is not click.core.ParameterSource.DEFAULT
        )
        saved = sweeps.save(db_of(ctx), save_as, model, table, given_grid, plan.dropped)
        err.print(f"saved {plural(saved, 'point')} as sweep '{save_as}' of {model}", markup=False)
    if only_pareto:
        table = sweeps.pareto(table)
    if columns is not None:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
        missing = [c for c in chosen if c not in table.column_names]
        if missing or not chosen:
            from archsql.errors import did_you_mean

            hint = did_you_mean(missing[0], table.column_names) if missing else None
            raise click.BadParameter(
                (f"no column {missing[0]!r}" if missing else "no column named")
                + (f" ({hint})" if hint else "")
                + f"; the columns are: {', '.join(table.column_names)}",
                param_hint="--columns",
            )
        table = table.select(chosen)
    elif fmt == "table":
        table = table.select(sweeps.narrow(table))
    emit(table, fmt, output)


def _serving_sweep(ctx, model, plan, framework_text, isl, osl, concurrency, memory_fraction, columns, fmt, output):
    """``sweep --rank-by serving``: the plan's layouts ranked by serving estimates."""
    from archsql import sweep as sweeps
    from archsql.serving import parse_framework

    missing = [
        n
        for n, v in (("--framework", framework_text), ("--isl", isl), ("--osl", osl), ("--concurrency", concurrency))
        if v is None
    ]
    if missing:
        raise click.UsageError(f"--rank-by serving needs {', '.join(missing)}")
    given = ctx.get_parameter_source("memory_fraction") is not click.core.ParameterSource.DEFAULT
    framework, version = parse_framework(framework_text)
    table, left_out = sweeps.serving_ranked(
        model,
        db_of(ctx),
        plan,
        framework,
        version,
        isl,
        osl,
        _ints(concurrency),
        memory_fraction=memory_fraction if given else None,
    )
    if left_out:
        from rich.text import Text

        err = console(stderr=True)
        err.print(Text(f"left out {plural(len(left_out), 'layout problem')}:", style="yellow"))
        for why in left_out:
            err.print(Text(f"  {printable(why)}"))
    if columns is not None:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
        missing = [c for c in chosen if c not in table.column_names]
        if missing or not chosen:
            raise click.BadParameter(
                f"no column {missing[0] if missing else ''!r}; the columns are: {', '.join(table.column_names)}",
                param_hint="--columns",
            )
        table = table.select(chosen)
    elif fmt == "table":
        table = table.drop_columns(["prefill_workload", "decode_workload", "deployment"])
    emit(table, fmt, output)


def db_of(ctx: click.Context) -> Path:
    """The store the command runs against (the group's ``--db``, or ``--db`` after the command)."""
    return ctx.obj


# the columns `serve-estimate` shows as a table (csv / json carry every column of serving_estimates)
SERVE_COLUMNS = (
    "framework",
    "version",
    "concurrency",
    "isl",
    "osl",
    "ttft_s",
    "tpot_s",
    "output_tokens_per_s",
    "prefill_step_s",
    "decode_step_s",
    "step_requests",
    "prefill_groups",
    "tokens_per_decode_step",
)
# and of a disaggregated case (--prefill-deployment)
SERVE_POOL_COLUMNS = ("kv_transfer_s", "request_rate", "limiting_pool", "prefill_utilisation", "decode_utilisation")


@cli.command("serve-estimate")
@click.argument("model")
@click.option(
    "--deployment",
    "--decode-deployment",
    "deployment",
    required=True,
    help="A deployment of the store (its speculative_tokens: MTP drafts); with --prefill-deployment, "
    "the decode pool's.",
)
@click.option(
    "--framework", required=True, help="FRAMEWORK@VERSION, e.g. sglang@0.5.9, vllm@0.12.0, trtllm@1.1.0rc2.post2."
)
@click.option("--isl", type=int, required=True, help="Input tokens per request.")
@click.option("--osl", type=int, required=True, help="Output tokens per request.")
@click.option("--concurrency", default="1", show_default=True, help="Client concurrency, e.g. 64 or 1,8,64.")
@click.option(
    "--acceptance-rate", type=float, default=None, help="MTP: chance a draft token is accepted after the previous one."
)
@click.option(
    "--prefill-deployment",
    default=None,
    help="Disaggregated prefill/decode (xPyD): the prefill pool's deployment (the decode pool's is --deployment).",
)
@click.option("--prefill-instances", type=int, default=None, help="xPyD: x, instances of the prefill deployment [1].")
@click.option("--decode-instances", type=int, default=None, help="xPyD: y, instances of the decode deployment [1].")
@click.option(
    "--kv-link-gbps",
    type=float,
    default=None,
    help="xPyD: the link the KV cache crosses, Gbit/s [the slower GPU's scale-out NIC, gpus.csv].",
)
@click.option("--kv-link-latency-us", type=float, default=None, help="xPyD: latency of one KV transfer, µs [0].")
@_FORMAT_OPTION
@_OUTPUT_OPTION
@click.pass_obj
def serve_estimate(
    db,
    model,
    deployment,
    framework,
    isl,
    osl,
    concurrency,
    acceptance_rate,
    prefill_deployment,
    prefill_instances,
    decode_instances,
    kv_link_gbps,
    kv_link_latency_us,
    fmt,
    output,
) -> None:
    """TTFT and TPOT of MODEL served on a deployment by a framework version (docs/serving.md).

    Aggregated in-flight batching at each client concurrency, from the serving_estimates view;
    the store is not changed.  With --prefill-deployment: disaggregated prefill/decode, x
    prefill instances and y decode instances, the KV cache sent between them.  Examples:
    archsql serve-estimate DeepSeek-V3 --deployment 8xH200-dp8-ep8-wnative --framework sglang@0.5.9
    --isl 1024 --osl 1024 --concurrency 8,64;
    archsql serve-estimate DeepSeek-V3 --prefill-deployment 8xH200-tp8-ep8-wnative --prefill-instances 2
    --decode-deployment 8xH200-dp8-ep8-wnative --decode-instances 1 --framework sglang@0.5.9 --isl 1024 --osl 1024
    """
    check_format(fmt, output)
    pools = dict(
        prefill_deployment=prefill_deployment,
        prefill_instances=prefill_instances,
        decode_instances=decode_instances,
        kv_link_bytes_per_s=None if kv_link_gbps is None else kv_link_gbps * 1e9 / 8,
        kv_link_latency_s=None if kv_link_latency_us is None else kv_link_latency_us / 1e6,
    )
    table = api.serve_estimate(
        model,
        deployment,
        framework,
        isl=isl,
        osl=osl,
        concurrency=_ints(concurrency),
        acceptance_rate=acceptance_rate,
        db=db,
        **pools,
    )
    columns = list(SERVE_COLUMNS) + (list(SERVE_POOL_COLUMNS) if prefill_deployment is not None else [])
    emit(table.select(columns) if fmt == "table" else table, fmt, output)


# The kernel corpus (archsql/kernel_corpus/cli.py) and design (archsql/design/cli.py)
# commands load on first use: LAZY_COMMANDS.

# ---------------------------------------------------------------------------- parameters

for _command in PARAMETER_COMMANDS:  # archsql deployment | workload | gpu  (archsql/cli_params.py)
    cli.add_command(_command)


def _set_db(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.obj = value


def accept_db_after(group: click.Command) -> None:
    """``--db`` after the subcommand as well as before it (``archsql sql --db S.duckdb "…"``):
    every command that reads the store (its callback takes the group's object) gets the option;
    a command loaded on first use (LAZY_COMMANDS) gets it when it loads."""
    commands = group.commands.values() if isinstance(group, click.Group) else [group]
    for command in commands:
        if isinstance(command, click.Group):
            accept_db_after(command)
        elif hasattr(command.callback, "__wrapped__") and not any(p.name == "db" for p in command.params):
            command.params.append(
                click.Option(
                    ["--db"],
                    type=click.Path(dir_okay=False, path_type=Path),
                    default=None,
                    expose_value=False,
                    is_eager=True,
                    callback=_set_db,
                    help="The DuckDB store (as archsql --db).",
                )
            )


accept_db_after(cli)


def main() -> None:
    """Entry point of the ``archsql`` script."""
    cli(prog_name="archsql")
