"""``archsql deployment|workload|gpu``: the store's parameter tables without raw SQL
(registered in archsql/cli.py).

Thin shells over :mod:`archsql.parameters` (also exported by :mod:`archsql.api`): every check
and its located error lives there.  The options of ``deployment add`` are derived from the
``deployments`` table's columns (archsql.schema.tables.PARAMETER_TABLES) and the mesh axes
(archsql.schema.parallel.MESH_AXES), so a new column or axis is an option without an edit here.
"""

from __future__ import annotations

from pathlib import Path

import click
import pyarrow as pa

from archsql import parameters
from archsql.output import check_format, emit, format_option, output_option, printable
from archsql.schema.parallel import MESH_AXES
from archsql.schema.tables import PARAMETER_TABLES, PHASES

# the columns `deployment list` shows as a table (every column with --format csv/json/parquet)
DEPLOYMENT_TABLE_COLUMNS = ("deployment", "gpu", "gpus", "mesh", "weight_profile", "kv_dtype")

_COLUMN_HELP = {
    "gpu": "A GPU of the store (archsql gpu list).",
    "gpus": "GPUs in the deployment [default: tp × cp × dp × pp; dp and moe_tp fill what the others leave].",
    "cp_kind": "Context-parallel kind: none (cp 1), ring or ulysses [default: none].",
    "nodes": "Nodes the GPUs span [default: one per scale-up domain].",
    "weight_dtype": "dtype the weight matmuls run in [default: bf16].",
    "act_dtype": "Activation dtype [default: bf16].",
    "kv_dtype": "KV-cache dtype [default: bf16].",
    "usable_memory_fraction": "Of GPU memory, the part weights, caches and activations may fill "
    "[default: the framework's].",
    "weight_profile": "How weights are stored: native or a precision profile (bf16, fp8, nvfp4, mxfp4) "
    "[default: the weight dtype].",
    "speculative_tokens": "MTP draft tokens per decode step (0: the MTP stack is not loaded).",
}


def _ints(text: str) -> int:
    """'8', '32k' (k = 1024) → an integer."""
    part = text.strip().lower()
    try:
        return int(part[:-1]) * 1024 if part.endswith("k") else int(part)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an integer (e.g. 8192 or 8k)") from None


class _Tokens(click.ParamType):
    name = "N"

    def convert(self, value, param, ctx):
        return value if isinstance(value, int) else _ints(str(value))


TOKENS = _Tokens()


def _show(table: pa.Table, fmt: str, output: Path | None, columns: tuple[str, ...] | None = None) -> None:
    check_format(fmt, output)
    if fmt == "table" and columns:
        table = table.select([c for c in columns if c in table.column_names])
    emit(table, fmt, output)


def _deployment_field_options(command):
    """One option per deployments column (but the name) and per mesh axis, plus --framework."""
    schema = PARAMETER_TABLES["deployments"]
    options = []
    for field in schema:
        if field.name == "deployment":
            continue
        kind = int if pa.types.is_integer(field.type) else float if pa.types.is_floating(field.type) else str
        flag = "--" + field.name.replace("_", "-")
        options.append(click.option(flag, field.name, type=kind, default=None, help=_COLUMN_HELP.get(field.name)))
    for axis in MESH_AXES:
        options.append(
            click.option(
                "--" + axis.name.replace("_", "-"),
                axis.name,
                type=int,
                default=None,
                help=f"Degree of {axis.name}: {axis.shards} [default: {axis.default}].",
            )
        )
    options.append(
        click.option(
            "--framework", default=None, help="Serving framework whose memory fraction applies [default: vllm]."
        )
    )
    for option in reversed(options):
        command = option(command)
    return command


# ---------------------------------------------------------------------------- deployment


@click.group("deployment")
def deployment() -> None:
    """Add, list and remove deployments (GPUs, mesh degrees, dtypes, memory)."""


@deployment.command("add")
@click.argument("name")
@click.option("--like", default=None, help="Copy every field not given from this deployment.")
@click.option("--replace", is_flag=True, help="Replace a deployment of that name.")
@_deployment_field_options
@format_option()
@output_option()
@click.pass_obj
def deployment_add(db: Path, name: str, like: str | None, replace: bool, fmt: str, output: Path | None, **fields):
    """Add deployment NAME; checked by the layout rules (deployment_checks) before it is kept.

    Example: archsql deployment add 8xH200-tp4-dp2-ep8 --gpu "H200 SXM" --tp 4 --dp 2 --ep 8
    """
    row = parameters.add_deployment(db, name, like=like, replace=replace, **fields)
    click.echo(printable(f"added deployment {name}"), err=True)
    _show(row, fmt, output, DEPLOYMENT_TABLE_COLUMNS)


@deployment.command("list")
@format_option()
@output_option()
@click.pass_obj
def deployment_list(db: Path, fmt: str, output: Path | None) -> None:
    """List the deployments (the table shows the main columns; csv/json/parquet all of them)."""
    _show(parameters.list_deployments(db), fmt, output, DEPLOYMENT_TABLE_COLUMNS)


@deployment.command("rm")
@click.argument("names", nargs=-1, required=True)
@click.pass_obj
def deployment_rm(db: Path, names: tuple[str, ...]) -> None:
    """Remove deployments (their mesh and framework rows with them)."""
    removed = parameters.remove_deployment_rows(db, list(names))
    click.echo(printable(f"removed deployment{'s' if len(removed) > 1 else ''} {', '.join(removed)}"))


# ---------------------------------------------------------------------------- workload


@click.group("workload")
def workload() -> None:
    """Add, list and remove workloads (phase, batch, new tokens, context, image patches)."""


@workload.command("add")
@click.argument("name")
@click.option("--phase", type=click.Choice(PHASES), required=True, help="prefill or decode.")
@click.option("-B", "--batch", type=int, default=1, show_default=True, help="B: requests in the step.")
@click.option("-c", "--context", type=TOKENS, required=True, help="c: tokens attended after the step (8k = 8192).")
@click.option(
    "-s",
    "--new-tokens",
    type=TOKENS,
    default=None,
    help="s: new tokens per request [default: 1 in decode, c in prefill].",
)
@click.option("-v", "--image-patches", type=int, default=0, show_default=True, help="v: image patches per request.")
@click.option("--replace", is_flag=True, help="Replace a workload of that name.")
@format_option()
@output_option()
@click.pass_obj
def workload_add(db: Path, name: str, fmt: str, output: Path | None, **fields) -> None:
    """Add workload NAME.

    Example: archsql workload add decode_b32_c32k --phase decode --batch 32 --context 32k
    """
    row, warnings = parameters.add_workload(db, name, **fields)
    for warning in warnings:
        click.echo(printable(f"warning: {warning}"), err=True)
    click.echo(printable(f"added workload {name}"), err=True)
    _show(row, fmt, output)


@workload.command("list")
@format_option()
@output_option()
@click.pass_obj
def workload_list(db: Path, fmt: str, output: Path | None) -> None:
    """List the workloads."""
    _show(parameters.list_workloads(db), fmt, output)


@workload.command("rm")
@click.argument("names", nargs=-1, required=True)
@click.pass_obj
def workload_rm(db: Path, names: tuple[str, ...]) -> None:
    """Remove workloads (their image rows with them)."""
    removed = parameters.remove_workload_rows(db, list(names))
    click.echo(printable(f"removed workload{'s' if len(removed) > 1 else ''} {', '.join(removed)}"))


# ---------------------------------------------------------------------------- gpu

# the columns `gpu list` shows as a table
GPU_TABLE_COLUMNS = ("gpu", "memory_capacity", "memory_capacity_unit", "mem_bandwidth_TBps", "bf16_fp16_dense_tflops")


def _assignment(text: str) -> tuple[str, str]:
    column, sep, value = text.partition("=")
    if not sep or not column.strip():
        raise click.BadParameter(f"{text!r} is not COLUMN=VALUE (e.g. mem_bandwidth_TBps=8)", param_hint="--set")
    return column.strip(), value.strip()


@click.group("gpu")
def gpu() -> None:
    """Add and list GPUs (the columns of archsql/gpus/gpus.csv)."""


@gpu.command("add")
@click.argument("name")
@click.option("--like", default=None, help="Copy every figure not given from this GPU (not its sources or flags).")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    help="COLUMN=VALUE for a gpus.csv column (repeatable); sources=… is required: where the figures come from.",
)
@click.option("--replace", is_flag=True, help="Replace a GPU of that name.")
@format_option()
@output_option()
@click.pass_obj
def gpu_add(
    db: Path, name: str, like: str | None, assignments: tuple[str, ...], replace: bool, fmt: str, output: Path | None
) -> None:
    """Add GPU NAME.

    Example: archsql gpu add "H200 NVL" --like "H200 SXM" --set scaleup_domain_gpus=4 --set sources="datasheet …"
    """
    values = dict(_assignment(a) for a in assignments)
    row = parameters.add_gpu(db, name, like=like, replace=replace, values=values)
    click.echo(printable(f"added GPU {name}"), err=True)
    _show(row, fmt, output, GPU_TABLE_COLUMNS)


@gpu.command("list")
@format_option()
@output_option()
@click.pass_obj
def gpu_list(db: Path, fmt: str, output: Path | None) -> None:
    """List the GPUs (the table shows the main figures; csv/json/parquet every column)."""
    _show(parameters.list_gpus(db), fmt, output, GPU_TABLE_COLUMNS)


COMMANDS = (deployment, workload, gpu)
