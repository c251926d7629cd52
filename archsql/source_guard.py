"""The source guard (design §10): every stream's ``src`` anchor must still be in the model's
forward source.

A stack's internal and append streams each carry ``src:`` — a sentence with one or more
back-quoted fragments of the forward code that passes the value across layers
(``topk_indices = prev_topk_indices``).  The model names that code with ``source:``: the
path of its modeling file inside its repository (a string or a list, e.g.
``src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py``).  Given where the sources
are on disk (files, or folders such as a repository checkout), the guard reads the named
files and looks for every fragment, whitespace-insensitively (a fragment's runs of spaces
and line breaks match any run in the source).  A fragment that is no longer there means the
source changed under the spec: the error names the stream, the fragment, the file searched
and the closest line there, located at the stream's ``src:`` in the model YAML.

The guard runs when sources are given (``validate(..., sources=[...])``,
``archsql validate MODEL --source PATH``), as the weight guard runs when a checkpoint is;
a stream with no producer or no reader is already an analysis error (the expander).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archsql.errors import Issue
from archsql.schema.spec import ModelSpec, Where

FRAGMENT = re.compile(r"`([^`]+)`")
SOURCE_EXAMPLE = "source: src/transformers/models/<model_type>/modeling_<model_type>.py"


@dataclass(frozen=True)
class SourceFile:
    name: str  # as the model names it
    path: Path  # where it was found
    lines: tuple[str, ...]

    @property
    def flat(self) -> str:
        return _flat("\n".join(self.lines))


def _flat(text: str) -> str:
    return " ".join(text.split())


def fragments(src: str) -> list[str]:
    """The back-quoted fragments of a ``src`` anchor, whitespace-normalized."""
    return [_flat(f) for f in FRAGMENT.findall(src or "") if _flat(f)]


def _issue(where: Where, message: str, **kw) -> Issue:
    return Issue(message, file=where.file, line=where.line, column=where.column, path=where.path, **kw)


def find_source(name: str, roots: Sequence[Path]) -> Path | None:
    """The file a model's ``source:`` entry names, under one of ``roots``: a file given
    directly (whose path ends with the name, or has its file name), or ``root/name``, or a
    file of that name directly in a given folder."""
    want = Path(name)
    for root in roots:
        if root.is_file():
            if root.as_posix().endswith(want.as_posix()) or root.name == want.name:
                return root
        elif root.is_dir():
            for candidate in (root / want, root / want.name):
                if candidate.is_file():
                    return candidate
    return None


def _closest(fragment: str, files: Sequence[SourceFile]) -> str | None:
    """'file:line `text`' of the source line most like the fragment (None: nothing close):
    the line holding the largest share of the fragment's characters in order (at least
    60%), ties broken by overall similarity."""
    best: tuple[float, float, str] | None = None
    for f in files:
        for number, line in enumerate(f.lines, start=1):
            text = _flat(line)
            if not text:
                continue
            matcher = difflib.SequenceMatcher(None, fragment, text, autojunk=False)
            covered = sum(block.size for block in matcher.get_matching_blocks()) / len(fragment)
            score = (covered, matcher.ratio(), f"{f.path.name}:{number} `{text}`")
            if covered >= 0.6 and (best is None or score[:2] > best[:2]):
                best = score
    return best[2] if best else None


def check_sources(model: ModelSpec, roots: Sequence[str | Path]) -> list[Issue]:
    """Issues of the source guard for ``model`` against the sources under ``roots``."""
    roots = [Path(r) for r in roots]
    streams = [
        (stack.name, spec)
        for stack in model.stacks.values()
        for spec in stack.stream_specs.values()
        if spec.kind != "carried" and spec.src is not None
    ]
    if not streams:
        return []
    model_where = model.where.get("source") or Where(model.file, None, None, "$.source")
    if not model.source:
        stack, first = streams[0]
        return [
            _issue(
                first.keys_where.get("src", first.where),
                f"stream '{first.name}' of stack '{stack}' quotes the forward source, but the model names no "
                "source to check its anchor against",
                hint=f"add the modeling file to the model: {SOURCE_EXAMPLE}",
            )
        ]
    files: list[SourceFile] = []
    issues: list[Issue] = []
    for name in model.source:
        path = find_source(name, roots)
        if path is None:
            issues.append(
                _issue(
                    model_where,
                    f"forward source '{name}' is not under the given sources",
                    expected=f"a file named {Path(name).name} (or {name} under a given folder)",
                    got=", ".join(str(r) for r in roots) or "no sources",
                    hint="pass the modeling file, or the repository checkout holding it "
                    "(archsql validate MODEL --source PATH)",
                )
            )
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            issues.append(_issue(model_where, f"forward source '{name}' cannot be read: {exc}", got=str(path)))
            continue
        files.append(SourceFile(name, path, tuple(text.splitlines())))
    if issues:
        return issues
    searched = ", ".join(str(f.path) for f in files)
    for stack, spec in streams:
        where = spec.keys_where.get("src", spec.where)
        found = fragments(spec.src)
        if not found:  # the schema requires a fragment; say so here too rather than pass
            issues.append(_issue(where, f"stream '{spec.name}': src quotes no back-quoted fragment", got=spec.src))
            continue
        for fragment in found:
            if any(fragment in f.flat for f in files):
                continue
            closest = _closest(fragment, files)
            issues.append(
                _issue(
                    where,
                    f"stream '{spec.name}' of stack '{stack}': src anchor `{fragment}` is not in the forward source",
                    expected=f"the fragment in {searched}",
                    got=f"closest line {closest}" if closest else "no similar line",
                    hint="the source changed under the spec: check that the stream still crosses layers the "
                    "way it says and quote the current code in src (or fix the model's source:)",
                )
            )
    return issues


__all__ = ["FRAGMENT", "check_sources", "find_source", "fragments"]
