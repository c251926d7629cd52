"""The authoring loop: an agent writes a draft spec in a scratch folder, the worker runs
every guard itself (the agent's word and exit status are never trusted), the structured
errors go back to the agent, until every guard passes or the budget (turns, seconds) is spent.

Agent backends (none is bundled):

- :class:`CommandAgent` — any CLI agent, from a user-written command template.  The command
  runs in the scratch folder with no shell; placeholders ``{prompt}`` (the prompt file),
  ``{draft}`` (the draft file to write), ``{feedback}`` (the last turn's errors, JSON; absent
  on the first turn), ``{turn}`` and ``{workdir}`` are filled in.
- :class:`ScriptedAgent` — replies given in advance (tests, replays): turn *i* writes reply *i*.

The output folder holds ``facts/`` (or the facts bundle given), ``scratch/`` (the agent's
folder: ``prompt.md``, ``config.json``, ``draft.yaml``, ``feedback.json``), ``draft.yaml`` (the
last draft) and ``report.json`` + ``report.md`` (each turn's errors, the guards' verdicts,
what is unresolved).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from archsql.author.facts import CONFIG, Facts
from archsql.author.guards import GUARDS, GuardReport, Reconciler, check
from archsql.errors import ArchsqlError, Issue

DRAFT = "draft.yaml"
PROMPT = "prompt.md"
FEEDBACK = "feedback.json"
REPORT = "report.json"
REPORT_MD = "report.md"
CLAIMS = "claims.txt"
PLACEHOLDERS = ("prompt", "draft", "feedback", "turn", "workdir")


class AuthorError(ArchsqlError, ValueError):
    """A bad agent command, budget or draft folder."""


@dataclass(frozen=True)
class Turn:
    """What the worker hands the agent on one turn."""

    number: int  # 1-based
    workdir: Path
    prompt: Path
    draft: Path
    feedback: Path | None  # the previous turn's errors (JSON), None on the first turn


class Agent(Protocol):
    def run(self, turn: Turn) -> str:
        """Write ``turn.draft``; return a short note (the agent's output, kept in the report)."""


class ScriptedAgent:
    """Writes reply *i* on turn *i*; a reply of ``None`` writes nothing (an agent that failed)."""

    def __init__(self, replies: list[str | None]):
        self.replies = list(replies)
        self.seen: list[Any] = []  # the feedback each turn was handed (parsed JSON, or None)

    def run(self, turn: Turn) -> str:
        self.seen.append(json.loads(turn.feedback.read_text(encoding="utf-8")) if turn.feedback else None)
        if turn.number > len(self.replies):
            return "scripted agent: no reply left"
        reply = self.replies[turn.number - 1]
        if reply is None:
            return "scripted agent: wrote nothing"
        turn.draft.write_text(reply, encoding="utf-8")
        return f"scripted agent: reply {turn.number}"


class CommandAgent:
    """Runs a user's command template (no shell) in the scratch folder, ``timeout`` seconds at most."""

    def __init__(self, template: str, timeout: float = 600.0):
        try:
            words = shlex.split(template)
        except ValueError as exc:
            raise AuthorError(issues=[Issue(f"cannot split the agent command: {exc}", got=template)]) from None
        if not words:
            raise AuthorError(
                issues=[
                    Issue("the agent command is empty", hint="e.g. --agent 'my-agent --prompt {prompt} --out {draft}'")
                ]
            )
        for word in words:
            try:
                word.format(**{p: "" for p in PLACEHOLDERS})
            except (KeyError, IndexError, ValueError) as exc:
                raise AuthorError(
                    issues=[
                        Issue(
                            f"unknown placeholder in the agent command: {exc}",
                            got=word,
                            hint="placeholders: " + ", ".join("{" + p + "}" for p in PLACEHOLDERS),
                        )
                    ]
                ) from None
        if shutil.which(words[0]) is None:
            raise AuthorError(
                issues=[Issue(f"agent command not found: {words[0]}", hint="give a command on PATH or its full path")]
            )
        self.words = words
        self.timeout = timeout

    def run(self, turn: Turn) -> str:
        values = {
            "prompt": str(turn.prompt),
            "draft": str(turn.draft),
            "feedback": str(turn.feedback or ""),
            "turn": str(turn.number),
            "workdir": str(turn.workdir),
        }
        argv = [w.format(**values) for w in self.words]
        try:
            done = subprocess.run(
                argv, cwd=turn.workdir, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError:
            raise AuthorError(
                issues=[Issue(f"agent command not found: {argv[0]}", hint="give a command on PATH or its full path")]
            ) from None
        except subprocess.TimeoutExpired:
            return f"agent timed out after {self.timeout:.0f} s"
        tail = (done.stdout + done.stderr)[-2000:]
        return f"exit {done.returncode}: {tail}"


@dataclass(frozen=True)
class Budget:
    turns: int = 6
    seconds: float = 1800.0

    def __post_init__(self):
        if self.turns < 1 or self.seconds <= 0:
            raise AuthorError(issues=[Issue("the budget needs at least 1 turn and some seconds", got=f"{self}")])


@dataclass
class AuthorResult:
    out: Path
    draft: Path | None
    passed: bool
    turns: list[dict[str, Any]] = field(default_factory=list)
    final: GuardReport | None = None
    stopped: str = ""
    claims: list[dict[str, str]] = field(default_factory=list)


def review(reviewer: Agent, facts: Facts, scratch: Path, prompt: Path) -> list[dict[str, str]]:
    """One review turn: the reviewer writes claims to ``claims.txt``; each is verified."""
    from dataclasses import asdict

    from archsql.author.evidence import verify_review

    claims_file = scratch / CLAIMS
    claims_file.unlink(missing_ok=True)
    reviewer.run(Turn(1, scratch, prompt, claims_file, None))
    if not claims_file.is_file():
        return []
    lines = [line for line in claims_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [asdict(r) for r in verify_review(lines, facts)]


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def author(
    facts: Facts,
    out: str | Path,
    agent: Agent,
    *,
    budget: Budget | None = None,
    library=None,
    reconciler: Reconciler | None = None,
    reviewer: Agent | None = None,
) -> AuthorResult:
    """Run the loop for ``facts`` into the folder ``out`` (module doc); returns the result and
    writes ``draft.yaml`` and the report there.  With a ``reviewer``, a draft that passes every
    guard is reviewed once: the reviewer writes claims and defects, one per line, to
    ``claims.txt`` (its turn's ``{draft}``), each classified against the facts
    (:mod:`archsql.author.evidence`); the verified defects alone go back to the agent in
    ``feedback.json`` (``review_defects``) for a fix turn, whose draft is guarded again."""
    from archsql.author.prompt import write as write_prompt

    budget = budget or Budget()
    out = Path(out).resolve()  # the agent runs in the scratch folder: every path it is given is absolute
    if (out / "facts").resolve() != facts.folder.resolve():  # the output folder holds its facts (promote reads them)
        from archsql.author.facts import load

        shutil.copytree(facts.folder, out / "facts", dirs_exist_ok=True)
        facts = load(out / "facts")
    scratch = out / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(facts.config_path, scratch / CONFIG)
    prompt = write_prompt(facts, scratch / PROMPT, library)
    draft = scratch / DRAFT
    feedback = scratch / FEEDBACK
    reconciler = reconciler or Reconciler(out / "stores")
    result = AuthorResult(out, None, False)
    reviewed = False
    start = time.monotonic()
    for number in range(1, budget.turns + 1):
        if time.monotonic() - start > budget.seconds:
            result.stopped = f"time budget spent ({budget.seconds:.0f} s) before turn {number}"
            break
        before = _sha(draft)
        turn = Turn(number, scratch, prompt, draft, feedback if feedback.is_file() else None)
        note = agent.run(turn)
        record: dict[str, Any] = {"turn": number, "agent": note[-500:]}
        if not draft.is_file():
            message = f"the agent wrote no {DRAFT} (agent: {note[-300:]})"
            record |= {"passed": False, "errors": [{"code": None, "message": message}]}
            result.turns.append(record)
            feedback.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            continue
        if _sha(draft) == before:
            record["note"] = "the draft did not change"
        report = check(draft, facts, library=library, reconciler=reconciler)
        record |= {
            "draft_sha256": _sha(draft),
            "passed": report.passed,
            "status": report.status,
            "errors": [e.to_dict() for e in report.errors],
        }
        result.turns.append(record)
        result.final = report
        feedback.write_text(
            json.dumps({"turn": number, "status": report.status, "errors": record["errors"]}, indent=1) + "\n",
            encoding="utf-8",
        )
        if report.passed and reviewer is not None and not reviewed:
            # one review round: only verified defects go back to the agent as a fix turn
            reviewed = True
            result.claims = review(reviewer, facts, scratch, prompt)
            record["review"] = result.claims
            defects = [c for c in result.claims if c["kind"] == "defect" and c["status"] == "verified"]
            if defects and number < budget.turns:
                feedback.write_text(
                    json.dumps(
                        {"turn": number, "status": report.status, "errors": [], "review_defects": defects}, indent=1
                    )
                    + "\n",
                    encoding="utf-8",
                )
                continue
        if report.passed:
            result.passed = True
            result.stopped = f"every guard passed on turn {number}"
            break
    else:
        result.stopped = f"turn budget spent ({budget.turns} turns)"
    if draft.is_file():
        shutil.copyfile(draft, out / DRAFT)
        result.draft = out / DRAFT
    write_report(result, facts)
    return result


def write_report(result: AuthorResult, facts: Facts) -> None:
    final = result.final
    unresolved = [e.to_dict() for e in final.errors] if final else []
    data = {
        "passed": result.passed,
        "stopped": result.stopped,
        "facts": str(facts.folder),
        "draft": str(result.draft) if result.draft else None,
        "draft_sha256": _sha(result.draft) if result.draft else None,
        "guards": final.status if final else {g: "never ran" for g in GUARDS},
        "unresolved": unresolved,
        "omitted": final.omitted if final else [],
        "turns": result.turns,
        "claims": result.claims,
    }
    (result.out / REPORT).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    lines = [
        "# archsql author report",
        "",
        f"- verdict: {'every guard passed' if result.passed else 'NOT passed'} ({result.stopped})",
        f"- facts: {facts.folder}",
        f"- draft: {result.draft}",
        "",
        "## Guards",
        *[f"- {g}: {s}" for g, s in data["guards"].items()],
        "",
        "## Turns",
    ]
    for t in result.turns:
        verdict = "passed" if t.get("passed") else f"{len(t['errors'])} error(s)"
        lines.append(f"### turn {t['turn']}: {verdict}")
        for e in t["errors"]:
            where = f" {e['location']}" if e.get("location") else ""
            lines.append(f"- {e.get('code') or 'agent'}{where}: {e['message']}")
    if data["omitted"]:
        lines += ["", "## Omitted parts (compared apart)"]
        for part in data["omitted"]:
            counts = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in part.items() if isinstance(v, int))
            lines.append(f"- {part['part']}: {part['reason']}" + (f" ({counts})" if counts else ""))
    if unresolved:
        lines += ["", "## Unresolved", *[f"- {e['code']} {e['location']}: {e['message']}" for e in unresolved]]
    if result.claims:
        lines += ["", "## Review claims", *[f"- {c['status']}: {c['claim']} ({c['evidence']})" for c in result.claims]]
    (result.out / REPORT_MD).write_text("\n".join(lines) + "\n", encoding="utf-8")


def promote(draft_dir: str | Path, to: str | Path, *, library=None, reconciler: Reconciler | None = None) -> Path:
    """Copy a fully guarded draft (``archsql author``'s output folder) into the user spec
    folder ``to`` as ``models/<model>.yaml`` with its config beside it, after running every
    guard again on it (the report is never trusted alone)."""
    from archsql.author.facts import load
    from archsql.schema.spec import parse_model

    d = Path(draft_dir)
    draft = d / DRAFT
    if not draft.is_file() or not (d / "facts").is_dir():
        raise AuthorError(
            issues=[
                Issue(
                    f"not an author output folder (no {DRAFT} or facts/)",
                    file=str(d),
                    hint="give the folder `archsql author` wrote",
                )
            ]
        )
    facts = load(d / "facts")
    # checked where the loop checked its drafts: the scratch folder, beside the facts' config
    scratch = d / "scratch"
    scratch.mkdir(exist_ok=True)
    shutil.copyfile(facts.config_path, scratch / CONFIG)
    staged = scratch / DRAFT
    if not staged.is_file() or staged.read_bytes() != draft.read_bytes():
        shutil.copyfile(draft, staged)
    report = check(staged, facts, library=library, reconciler=reconciler)  # the checkpoint runs when all else passes
    if not report.passed:
        raise AuthorError(
            f"{draft} does not pass every guard; not promoted",
            [Issue(e.message, file=e.location, hint=e.hint) for e in report.errors]
            or [Issue(f"guards: {report.status}")],
        )
    spec, _ = parse_model(draft)
    name = spec.name
    target = Path(to) / "models"
    target.mkdir(parents=True, exist_ok=True)
    config_name = f"{name}.config.json"
    text = draft.read_text(encoding="utf-8")
    text = _rewrite_config(text, config_name)
    if (target / f"{name}.yaml").exists():
        raise AuthorError(
            issues=[Issue(f"{target / (name + '.yaml')} exists", hint="remove it first, or give another --to folder")]
        )
    shutil.copyfile(facts.config_path, target / config_name)
    (target / f"{name}.yaml").write_text(text, encoding="utf-8")
    return target / f"{name}.yaml"


def _rewrite_config(text: str, config_name: str) -> str:
    import re

    new, n = re.subn(r"(?m)^config:.*$", f"config: {config_name}", text, count=1)
    if n != 1:
        raise AuthorError(issues=[Issue("the draft has no top-level config: line")])
    return new
