"""``archsql kernels MODEL --framework vllm@0.11 --deployment D``: what a serving framework
launches for a model on a GPU deployment, kernel by kernel, and which fusions it does not
apply and why.  A thin shell over :func:`archsql.launch.launched` (numbers from the views
``launched_kernels`` and ``fusion_hits``)."""

from __future__ import annotations

from pathlib import Path

import click
import pyarrow as pa

from archsql.output import check_format, console, emit, format_option, human_seconds, output_option
from archsql.schema.tables import PHASES


def _where(uid: str) -> str:
    return uid.rsplit("/", 1)[0] if "/" in uid else ""


def _short(uids: list[str], where: str) -> str:
    """Members without the path they share with the kernel (``decoder/dense/mlp.act`` →
    ``mlp.act`` under ``decoder/dense``); a member elsewhere keeps its whole uid."""
    return " + ".join(u[len(where) + 1 :] if where and u.startswith(where + "/") else u for u in uids)


@click.command("kernels")
@click.argument("model")
@click.option("--framework", required=True, help="name@version (vllm@0.11, sglang@0.5) or a name for its newest rules.")
@click.option("--deployment", required=True, help="A deployment of the store (archsql deployment list).")
@click.option("--workload", default=None, help="A workload of the store [default: the first of --phase].")
@click.option("--phase", type=click.Choice(PHASES), default="decode", show_default=True)
@format_option(("table", "csv", "json"))
@output_option()
@click.pass_obj
def kernels_cmd(
    db: Path, model: str, framework: str, deployment: str, workload: str | None, phase: str, fmt: str, output
) -> None:
    """What FRAMEWORK launches for MODEL on DEPLOYMENT: one row per kernel (its members,
    FLOPs, HBM bytes, speed-of-light time fused and unfused), then the fusion rules that
    match but are not applied, with the reason.  csv/json: the kernel rows only."""
    from archsql.launch import launched

    check_format(fmt, output)
    got = launched(db, model, framework=framework, deployment=deployment, workload=workload, phase=phase)
    rows = got.kernels
    if fmt != "table":
        emit(rows.drop_columns(["kernel_uid"]), fmt, output)
        return
    shown = pa.table(
        {
            "kernel": rows.column("kernel"),
            "rule": [r or "" for r in rows.column("rule").to_pylist()],
            "where": [_where(u) for u in rows.column("kernel_uid").to_pylist()],
            "members": [
                _short(m, _where(u))
                for m, u in zip(rows.column("members").to_pylist(), rows.column("kernel_uid").to_pylist(), strict=True)
            ],
            "flops": rows.column("flops"),
            "bytes": rows.column("bytes"),
            "time_s": rows.column("time_s"),
            "unfused_time_s": rows.column("unfused_time_s"),
            "bound": rows.column("bound"),
        }
    )
    title = (
        f"{got.framework} {got.version} launches for {got.model} on {got.deployment} ({got.gpu}), "
        f"{got.workload} ({got.phase}): {rows.num_rows} kernels, "
        f"{human_seconds(got.time_s)} fused vs {human_seconds(got.unfused_time_s)} op by op"
    )
    emit(shown, fmt, output, title=title)
    if got.not_launched.num_rows:
        skipped = pa.table(
            {
                "rule": got.not_launched.column("rule"),
                "members": [" + ".join(m) for m in got.not_launched.column("members").to_pylist()],
                "reason": got.not_launched.column("reason"),
            }
        )
        emit(skipped, fmt, output, title="matched but not launched (runs unfused)")
    elif output is None:
        console().print("every matching fusion rule is launched")
