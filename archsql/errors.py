"""One exception hierarchy for archsql.

Every user-facing failure is an :class:`ArchsqlError`.  Errors that concern a place in a
file carry one or more :class:`Issue` records (file, line, column, YAML path, message,
expected/got, hint) so that all problems of a file are reported together.  The CLI prints
an ``ArchsqlError`` without a traceback.  Each subclass also subclasses the matching builtin
so callers can catch ``ValueError``/``KeyError`` where that is natural.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One located problem."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None  # YAML path, e.g. $.graph.o_proj.dims.out
    expected: str | None = None
    got: str | None = None
    hint: str | None = None
    # which check raised it, for callers that act on the kind of problem (never on the
    # wording): e.g. "dim_unused", "axiom:window_cache" (archsql/author/guards.py RULE_CODES)
    rule: str | None = None

    def location(self) -> str:
        loc = self.file or "<input>"
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def render(self) -> str:
        head = self.location() if self.file or self.line is not None else ""
        if self.path:
            head = f"{head} {self.path}".strip()
        text = f"{head}: {self.message}" if head else self.message
        parts = [f"{k} {v}" for k, v in (("expected", self.expected), ("got", self.got)) if v is not None]
        if parts:
            text += f" ({', '.join(parts)})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


# The exit codes of every archsql command (archsql.output.report_errors applies them once,
# at the command line's entry): a verdict is not an error, a user error is not a bug.
EXIT_OK = 0
EXIT_VERDICT = 1  # the command ran and its answer is "no": validate "not publishable", audit "reject"
EXIT_USER_ERROR = 2  # bad input (an ArchsqlError, a usage error, an unreadable path): a message, no traceback
EXIT_INTERNAL_ERROR = 3  # a bug or exhausted memory: a short message and the path of a log with the traceback


# An error shows its first issues and counts the rest: a file with two million problems is
# reported in one screen (and rendered in constant time), not in two million lines.
MAX_SHOWN_ISSUES = 50


class ArchsqlError(Exception):
    """Base class of every error archsql raises for bad input.  All its issues are kept in
    ``issues``; the message shows the first MAX_SHOWN_ISSUES and a count of the rest."""

    def __init__(self, message: str | None = None, issues: Iterable[Issue] = ()):
        self.issues: list[Issue] = list(issues)
        shown = [i.render() for i in self.issues[:MAX_SHOWN_ISSUES]]
        if len(self.issues) > MAX_SHOWN_ISSUES:
            shown.append(f"… and {len(self.issues) - MAX_SHOWN_ISSUES:,} more")
        if message is None:
            message = "\n".join(shown)
        elif shown:
            message = message + "\n" + "\n".join("  " + line for line in shown)
        super().__init__(message)


class SpecError(ArchsqlError, ValueError):
    """A spec file (component, model, dims, roles) is malformed or inconsistent."""


class ConfigError(ArchsqlError, KeyError):
    """A config.json value a spec needs is missing or has the wrong type."""

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class ShapeError(ArchsqlError, ValueError):
    """Tensors that cannot be joined: rank, axis sizes, stream shape changes."""


class EvaluationError(ArchsqlError, RuntimeError):
    """A spec that cannot be evaluated."""


class LayoutError(ArchsqlError, ValueError):
    """An impossible parallel layout."""


class ReconciliationError(ArchsqlError, ValueError):
    """A checkpoint does not match its spec."""


class CheckpointError(ArchsqlError, ValueError):
    """A checkpoint (safetensors/GGUF file, shard set, HF cache folder or Hub repo) cannot be read."""


class UnsafeSQLError(ArchsqlError, PermissionError):
    """A query that would modify the database through a read-only entry point."""


class QueryError(ArchsqlError, ValueError):
    """A query that cannot run (unknown view/column, syntax error)."""


class StoreError(ArchsqlError, FileNotFoundError):
    """The DuckDB store is missing or was built by an incompatible version."""


class ParameterError(ArchsqlError, ValueError):
    """A parameter-table row (deployment, workload, GPU) that cannot be added or removed:
    an unknown name, a value out of its domain, degrees that do not multiply to the GPUs."""


class GpuTableError(ArchsqlError, ValueError):
    """The GPU table (archsql/gpus/gpus.csv) has a malformed row or column."""


class DesignError(ArchsqlError, ValueError):
    """A design request (component comparison, model edit, graph diff, audit) that cannot be
    carried out: unknown slot or component, dims left unbound, bad evidence records."""


class CorpusError(ArchsqlError, ValueError):
    """Kernel-corpus input that cannot be imported at all (unreadable file, bad header,
    unknown source) or a measurement run that cannot start; bad rows are rejected one by one."""


def did_you_mean(name: str, choices: Iterable[str]) -> str | None:
    """Return ``"did you mean 'x'?"`` for the closest choice, or None."""
    matches = difflib.get_close_matches(str(name), sorted(set(map(str, choices))), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None


def plural_of(noun: str) -> str:
    """The English plural of a noun as messages use them ("query" → "queries", "class" →
    "classes", "model" → "models")."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u", ""):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> tuple[str, str]:
    """Message and hint for an unknown registry entry."""
    choices = sorted(set(map(str, choices)))
    hint = did_you_mean(name, choices)
    if hint is None:
        shown = ", ".join(choices[:12]) + (", …" if len(choices) > 12 else "")
        hint = f"known {plural_of(kind)}: {shown}"
    return f"unknown {kind} '{name}'", hint


class EngineError(ArchsqlError, RuntimeError):
    """Another query engine (``--engine spark``) cannot be used: its optional dependency is
    not installed, or it rejected a view or query."""
