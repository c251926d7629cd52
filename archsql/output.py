"""Output shared by every command line (``archsql``, its design and corpus commands): a rich
console, human-readable numbers, and a query result printed or written in one of FORMATS."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
from rich.console import Console
from rich.table import Table
from rich.text import Text

from archsql.errors import EXIT_INTERNAL_ERROR, EXIT_USER_ERROR, ArchsqlError

FORMATS = ("table", "csv", "json", "parquet")


def console(stderr: bool = False) -> Console:
    """A rich console; off a terminal, tables keep their natural width (no wrapping)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(file=stream, stderr=stderr)
    return Console(file=stream, width=100_000, color_system=None, highlight=False)


def human(n: float | int | None) -> str:
    """8030261248 → '8.03 B': three significant digits and a K/M/B/T suffix."""
    if n is None:
        return "—"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {suffix}"
    return f"{n:g}" if isinstance(n, float) else str(n)


def human_bytes(n: float | int | None) -> str:
    """131072 → '128 KiB' (binary units)."""
    if n is None:
        return "—"
    for scale, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {suffix}"
    return f"{n:g} B"


def _sig3(x: float) -> str:
    text = f"{x:.3g}"
    return f"{float(text):.0f}" if "e" in text else text


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() and abs(value) < 1e18 else f"{value:.6g}"
    return str(value)


def rich_table(table: pa.Table, title: str | None = None) -> Table:
    out = Table(title=title, header_style="bold")
    for field in table.schema:
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
        out.add_column(Text(field.name), justify="right" if numeric else "left")
    for row in table.to_pylist():
        out.add_row(*(Text(cell(v)) for v in row.values()))
    return out


def flat(table: pa.Table) -> pa.Table:
    """Nested and binary columns (weights.shape, …) as JSON text, so CSV can hold them."""
    for i, field in enumerate(table.schema):
        t = field.type
        if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            text = [None if v is None else json.dumps(v, default=str) for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()), pa.array(text, pa.string()))
    return table


def write_text(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")


def emit(result: pa.Table, fmt: str, output: Path | None) -> None:
    """Print or write a query result in one of FORMATS."""
    if fmt == "table":
        if output is None:
            console().print(rich_table(result))
        else:
            buffer = io.StringIO()
            Console(file=buffer, width=100_000, color_system=None).print(rich_table(result))
            output.write_text(buffer.getvalue(), encoding="utf-8")
    elif fmt == "csv":
        sink = io.StringIO()
        writer = csv.writer(sink, lineterminator="\n")
        flat_result = flat(result)
        writer.writerow(flat_result.column_names)
        writer.writerows(["" if v is None else v for v in row.values()] for row in flat_result.to_pylist())
        write_text(sink.getvalue(), output)
    elif fmt == "json":
        rows = [json.dumps(row, default=str) for row in result.to_pylist()]
        write_text("[\n" + ",\n".join(f"  {r}" for r in rows) + ("\n]\n" if rows else "]\n"), output)
    else:
        import pyarrow.parquet as pq

        pq.write_table(result, str(output))
    if output is not None:
        click.echo(f"wrote {result.num_rows} rows to {output}", err=True)


def check_format(fmt: str, output: Path | None) -> None:
    if fmt == "parquet" and output is None:
        raise click.UsageError("--format parquet needs --output FILE")


# ---------------------------------------------------------------------------- the exit-code contract


def report_errors(ctx: click.Context, call: Callable[[], Any]) -> Any:
    """Run a command under the exit-code contract (archsql.errors.EXIT_*): archsql's own errors
    and unreadable paths print one message and exit 2; anything else is a bug (or exhausted
    memory): one short line, the traceback written to a log file whose path is printed, exit 3.
    No input a user gives ends in a traceback on the terminal.  Click's own exits (usage
    errors: 2) and a verdict's ``sys.exit(1)`` pass through."""
    try:
        return call()
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
        raise
    except ArchsqlError as exc:
        click.echo(f"error: {exc}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    except OSError as exc:  # a path given on the command line: missing, a folder, no permission, disk full
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"error: {exc.strerror or exc}{where}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        ctx.exit(130)
    except MemoryError:
        log = _write_log(ctx)
        click.echo(
            "error: out of memory; the input asks for more than this machine holds "
            f"(fewer models, a smaller grid or a smaller checkpoint).{log}",
            err=True,
        )
        ctx.exit(EXIT_INTERNAL_ERROR)
    except Exception as exc:
        log = _write_log(ctx)
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:300] + "…"
        click.echo(f"internal error: {type(exc).__name__}: {text}", err=True)
        click.echo(f"this is a bug in archsql, not in the input.{log}", err=True)
        ctx.exit(EXIT_INTERNAL_ERROR)


def log_dir() -> Path:
    """Where tracebacks of internal errors go: $ARCHSQL_LOG_DIR, else ~/.cache/archsql/logs
    ($XDG_CACHE_HOME honoured)."""
    if os.environ.get("ARCHSQL_LOG_DIR"):
        return Path(os.environ["ARCHSQL_LOG_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "archsql" / "logs"


def _write_log(ctx: click.Context) -> str:
    """Write the current exception's traceback to a new log file; a sentence naming it."""
    from archsql import __version__

    body = (
        f"archsql {__version__}, Python {sys.version.split()[0]}\n"
        f"command line: {' '.join(sys.argv)}\nsubcommand: {ctx.invoked_subcommand}\n\n{traceback.format_exc()}"
    )
    name = f"archsql-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_text(body, encoding="utf-8")
        except OSError:
            continue
        return f" The traceback is in {path} (attach it to a bug report)."
    return " (no log could be written: " + " ".join(traceback.format_exception_only(sys.exc_info()[1])).strip() + ")"
