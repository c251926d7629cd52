"""Output shared by every command line (``archsql``, its design and corpus commands): a rich
console, human-readable numbers, and a query result printed or written in one of FORMATS.

What a person reads and what a program reads differ on purpose:

- **table** (the terminal view): numbers carry human units chosen by the column's name
  (:func:`unit_of`: ``*_bytes`` in KiB/MiB/GiB, ``*_s`` in µs/ms/s, ``*flops*`` in
  GFLOP/TFLOP, ``*params`` in K/M/B), and the table never grows wider than the terminal
  (``$COLUMNS`` when set): text columns wrap, and when the numbers alone do not fit, each row
  is printed as a vertical record (``column  value`` lines) instead.
- **csv / json / parquet**: the exact stored values, unchanged.

Text from the input (model, tensor and file names) is printed with its control characters
escaped (:func:`printable`): a name holding a terminal escape sequence (clear the screen,
set the window title) shows as ``\\x1b[2J`` rather than acting on the terminal.  The escaping
is applied once, here: by :class:`SafeConsole` to every string it renders, by :func:`cell`
to every table value, and by :func:`report_errors` to every error message.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pyarrow as pa

from archsql.errors import EXIT_INTERNAL_ERROR, EXIT_USER_ERROR, ArchsqlError, plural_of

if TYPE_CHECKING:  # rich loads when something is printed through it: csv and json do not need it
    from rich.console import Console
    from rich.table import Table

FORMATS = ("table", "csv", "json", "parquet")

# C0 and C1 control characters (ESC starts every terminal escape sequence) and the Unicode
# bidirectional overrides that reorder what a terminal shows
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``,
    ``\\u202e``), so that printing it cannot move the cursor, clear the screen or retitle the
    window.  ``newlines``: keep line breaks (a multi-line message)."""

    def escape(match: re.Match) -> str:
        ch = match.group()
        if newlines and ch == "\n":
            return ch
        return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")

    return _CONTROL.sub(escape, text)


@functools.cache
def _safe_console() -> type:
    from rich.console import Console

    class SafeConsole(Console):
        """A rich console that escapes control characters in every string it renders (printed
        strings and table cells given as strings; :class:`rich.text.Text` built by archsql is
        escaped where it is made)."""

        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(printable(text, newlines=True), **kwargs)

    return SafeConsole


def terminal_width() -> int | None:
    """``$COLUMNS`` when it is set to a number (what a shell exports, and what tests set)."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def console(stderr: bool = False) -> Console:
    """A rich console as wide as the terminal ($COLUMNS wins); off a terminal with no
    $COLUMNS, tables keep their natural width (a pipe or a file gets every column)."""
    stream = sys.stderr if stderr else sys.stdout
    width = terminal_width()
    safe = _safe_console()  # escapes control characters in every string it renders
    if stream.isatty():
        return safe(file=stream, stderr=stderr, width=width)
    return safe(file=stream, width=width or 100_000, color_system=None, highlight=False)


def progress_bar(err: Console, description_width: int) -> Any:
    """The CLI's progress bar on ``err``: a description padded to ``description_width``, the
    bar, done / total and the time elapsed; on a terminal it is gone once the work is done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{{task.description:<{description_width}}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=err.is_terminal,
    )


def human(n: float | int | None) -> str:
    """8030261248 → '8.03 B': three significant digits and a K/M/B/T suffix."""
    if n is None:
        return "—"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {suffix}"
    return f"{_zero(n):g}" if isinstance(n, float) else str(n)


def human_bytes(n: float | int | None) -> str:
    """131072 → '128 KiB' (binary units)."""
    if n is None:
        return "—"
    for scale, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {suffix}"
    return f"{_zero(n):g} B"


def human_seconds(n: float | int | None) -> str:
    """0.00335 → '3.35 ms' (s, ms, µs, ns)."""
    if n is None:
        return "—"
    if n == 0:
        return "0 s"
    for scale, suffix in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {suffix}"
    return f"{_sig3(n / 1e-9)} ns"


def human_flops(n: float | int | None) -> str:
    """2.1e12 → '2.1 TFLOP' (K, M, G, T, P, E)."""
    if n is None:
        return "—"
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {prefix}FLOP"
    return f"{_zero(n):g} FLOP"


def _zero(x: float | int) -> float | int:
    return abs(x) if x == 0 else x  # -0.0 prints as 0


def _sig3(x: float) -> str:
    text = f"{x:.3g}"
    return f"{float(text):.0f}" if "e" in text else text


def delta(value: float | int | None, fmt: Callable[[Any], str] = human) -> str:
    """A signed difference in ``fmt``'s units: '+1.2 GiB', '-3 ms', and exactly '0' when it is zero."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "") + fmt(value)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun if n == 1 else plural_of(noun)}"


# ---------------------------------------------------------------------------- units by column name

# a column's unit, read from its name (the views name their columns by unit: memory_bytes,
# time_s, flops_per_new_token, active_params); a rate (tokens_per_s) is not a time
HUMAN_UNITS: dict[str, Callable[[Any], str]] = {
    "bytes": human_bytes,
    "s": human_seconds,
    "FLOP": human_flops,
    "count": human,
}


def unit_of(name: str) -> str | None:
    """The human unit a numeric column is printed in (a key of HUMAN_UNITS), or None: exact.

    ``*bytes*`` (kv_bytes, bytes_per_request) → bytes; ``*_s`` but not ``*_per_s`` → s;
    ``*flops*`` (flops, flops_per_new_token) → FLOP; ``params`` / ``*_params`` → count."""
    parts = name.lower().split("_")
    if "bytes" in parts:
        return "bytes"
    if len(parts) > 1 and parts[-1] == "s" and parts[-2] != "per":
        return "s"
    if "flops" in parts:
        return "FLOP"
    if parts[-1] == "params":
        return "count"
    return None


def cell(value: Any, unit: str | None = None) -> str:
    """One value as the table shows it: in ``unit`` (HUMAN_UNITS) when given, else exact
    (integers whole, floats to 6 significant digits, -0 as 0); text with its control
    characters escaped."""
    if value is None:
        return "NULL"
    if isinstance(value, Decimal):  # a SQL literal such as 0.0: exact digits, zero as 0
        value = float(value) if unit is not None else value
        if not isinstance(value, float):
            return "0" if value == 0 else str(value)
    if unit is not None and isinstance(value, int | float) and not isinstance(value, bool):
        return HUMAN_UNITS[unit](value)
    if isinstance(value, float):
        value = _zero(value)
        return f"{value:.0f}" if value.is_integer() and abs(value) < 1e18 else f"{value:.6g}"
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list | dict):
        return printable(json.dumps(value, default=str, ensure_ascii=False))
    return printable(str(value))


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


# ---------------------------------------------------------------------------- tables that fit

# a text column (and its header) wraps, but not below this many characters
MIN_TEXT_WIDTH = 10
# what a table's frame costs per column and in all: the boxed view puts " │ " between columns
# and "│ " / " │" at the edges; the compact view (no vertical rules) two spaces between columns
_FRAMES = (("HEAVY_HEAD", 3, 1), ("SIMPLE_HEAD", 2, 0))  # rich.box names


def rich_table(table: pa.Table, title: str | None = None, width: int | None = None) -> Table | Any:
    """The terminal view of a result: numbers in human units (:func:`unit_of`), text escaped.
    With ``width``: a view no wider than it — the boxed table; else the same table with its
    text columns wrapped, boxed or (narrower) without vertical rules; when the numbers
    alone need more, a vertical record view (one ``column  value`` block per row)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    units = [unit_of(f.name) if _numeric(f.type) else None for f in table.schema]
    numeric = [_numeric(f.type) for f in table.schema]
    headers = [printable(name) for name in table.column_names]
    rows = [[cell(v, u) for v, u in zip(row.values(), units, strict=True)] for row in table.to_pylist()]
    frame = box.HEAVY_HEAD
    if width is not None and rows:
        fitting = [
            b for b, per_column, edges in _FRAMES if _needed_width(headers, rows, numeric, per_column, edges) <= width
        ]
        if not fitting:
            return record_view(headers, rows, title=title, width=width)
        frame = getattr(box, fitting[0])
    out = Table(title=title, header_style="bold", box=frame)
    for i, (name, is_number) in enumerate(zip(headers, numeric, strict=True)):
        out.add_column(
            Text(name, overflow="fold"),
            justify="right" if is_number else "left",
            no_wrap=is_number or i == 0,
            overflow="fold",
        )
    for row in rows:
        out.add_row(*(Text(v, overflow="fold") for v in row))
    return out


def _needed_width(headers: list[str], rows: list[list[str]], numeric: list[bool], per_column: int, edges: int) -> int:
    """Width of the table with every number, the first column (the row's name) and their headers
    on one line, the other text columns and their headers wrapped to MIN_TEXT_WIDTH, in a
    frame costing ``per_column`` characters a column plus ``edges``."""
    from rich.cells import cell_len

    total = 0
    for i, header in enumerate(headers):
        longest = max(cell_len(r[i]) for r in rows)
        if numeric[i] or i == 0:
            total += max(cell_len(header), longest)
        else:
            total += min(max(longest, cell_len(header)), MIN_TEXT_WIDTH)
    return total + per_column * len(headers) + edges


def record_view(headers: list[str], rows: list[list[str]], *, title: str | None, width: int) -> Any:
    """Rows as vertical records (psql's expanded display): a rule per row, then one
    ``column  value`` line per column, values wrapped to the width."""
    from rich.cells import cell_len
    from rich.console import Group
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    key_width = min(max(cell_len(h) for h in headers), max(8, width // 3))
    parts: list[Any] = [Text(title, style="bold")] if title else []
    for n, row in enumerate(rows, start=1):
        parts.append(Rule(f"row {n}", align="left", characters="─"))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", width=key_width, overflow="fold")
        grid.add_column(overflow="fold")
        for header, value in zip(headers, row, strict=True):
            grid.add_row(Text(header), Text(value))
        parts.append(grid)
    return Group(*parts)


def show(table: pa.Table, title: str | None = None, out: Console | None = None) -> None:
    """Print a result as a terminal table that fits the console's width."""
    out = out or console()
    out.print(rich_table(table, title=title, width=out.width))


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


def emit(result: pa.Table, fmt: str, output: Path | None, *, title: str | None = None) -> None:
    """Print or write a query result in one of FORMATS: ``table`` for a person (human units,
    as wide as the terminal), csv/json/parquet with the exact values.  CSV printed to a
    terminal has its control characters escaped; JSON escapes them itself."""
    if fmt == "table":
        if output is None:
            show(result, title=title)
        else:
            from rich.console import Console

            buffer = io.StringIO()
            Console(file=buffer, width=100_000, color_system=None).print(rich_table(result, title=title))
            output.write_text(buffer.getvalue(), encoding="utf-8")
    elif fmt == "csv":
        sink = io.StringIO()
        writer = csv.writer(sink, lineterminator="\n")
        flat_result = flat(result)
        writer.writerow(flat_result.column_names)
        writer.writerows(["" if v is None else v for v in row.values()] for row in flat_result.to_pylist())
        text = sink.getvalue()
        write_text(printable(text, newlines=True) if output is None and sys.stdout.isatty() else text, output)
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


def format_option(formats: tuple[str, ...] = FORMATS):
    """The ``--format`` option of a command that prints rows."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(formats),
        default="table",
        show_default=True,
        help="table: for a person (human units, fits the terminal); csv/json/parquet: the exact values.",
    )


def output_option():
    """The ``--output/-o`` option of a command that prints rows."""
    return click.option(
        "--output",
        "-o",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write to this file instead of stdout (required for parquet).",
    )


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
        click.echo(f"error: {printable(str(exc), newlines=True)}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    except OSError as exc:  # a path given on the command line: missing, a folder, no permission, disk full
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(printable(f"error: {exc.strerror or exc}{where}", newlines=True), err=True)
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
        text = printable(" ".join(str(exc).split()))
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
