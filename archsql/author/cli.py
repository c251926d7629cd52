"""``archsql author | promote``: spec authoring commands (registered lazily in archsql/cli.py).

``author`` gathers the facts of a checkpoint folder, runs the agent loop
(:mod:`archsql.author.loop`) and writes a draft spec with its report; exit 1 when the draft
does not pass every guard.  ``promote`` runs every guard again on a draft and copies it into
a user spec folder (``archsql build --specs DIR``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from archsql.errors import EXIT_VERDICT


def _budget(text: str):
    """``turns=6,seconds=1800`` (either part may be left out)."""
    from archsql.author.loop import Budget

    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("turns", "seconds"):
            raise click.BadParameter(f"{part!r}: write turns=N and/or seconds=S, e.g. turns=6,seconds=1800")
        try:
            values[key] = float(value)
        except ValueError:
            raise click.BadParameter(f"{part!r}: {value!r} is not a number") from None
    return Budget(turns=int(values.get("turns", 6)), seconds=values.get("seconds", 1800.0))


@click.command("author")
@click.argument("source")
@click.option(
    "--agent",
    "agent_cmd",
    required=True,
    help="The agent command template, run in the scratch folder without a shell; placeholders "
    "{prompt} {draft} {feedback} {turn} {workdir}. None is bundled.",
)
@click.option(
    "--reviewer",
    "reviewer_cmd",
    default=None,
    help="A reviewer command template, run once after every guard passed; it writes claims and "
    "'defect: WHAT :: CLAIM …' lines to {draft} (claims.txt); verified defects go back to the agent.",
)
@click.option("--budget", default="turns=6,seconds=1800", show_default=True, help="turns=N,seconds=S")
@click.option(
    "--inventory",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A meta-device module inventory (.json or .json.gz): the params guard, and the tensor "
    "inventory when SOURCE has no checkpoint files.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder [default: ./author-<folder or repo name>].",
)
@click.option(
    "--build-inventory",
    is_flag=True,
    help="Without --inventory: build a meta-device inventory on the fly for the params guard "
    "(needs torch and transformers; neither is an archsql dependency).",
)
@click.option("--revision", default=None, help="Revision of a Hub repo id (branch, tag or commit).")
@click.option(
    "--offline",
    is_flag=True,
    help="Read a Hub repo id from the local Hugging Face cache only (HF_HUB_OFFLINE=1 does the same).",
)
def author_cmd(
    source: str,
    agent_cmd: str,
    reviewer_cmd: str | None,
    budget: str,
    inventory: Path | None,
    out: Path | None,
    build_inventory: bool,
    revision: str | None,
    offline: bool,
) -> None:
    """Write a draft spec for SOURCE — a checkpoint folder (config.json, safetensors headers,
    modeling *.py) or a Hugging Face repo id (the HF cache first, then metadata calls; never
    weights) — with an agent, guarded by the worker; writes draft.yaml and report.json/.md."""
    from archsql.author.facts import gather, gather_hub
    from archsql.author.loop import CommandAgent, author

    plan = _budget(budget)
    agent = CommandAgent(agent_cmd, timeout=plan.seconds)
    reviewer = CommandAgent(reviewer_cmd, timeout=plan.seconds) if reviewer_cmd else None
    path = Path(source).expanduser()
    if path.exists():
        out = out or Path(f"author-{path.resolve().name if path.is_dir() else path.resolve().parent.name}")
        facts = gather(path, out / "facts", meta_inventory=inventory, build_inventory=build_inventory)
    else:
        out = out or Path(f"author-{source.split('@')[0].rstrip('/').rsplit('/', 1)[-1]}")
        facts = gather_hub(
            source,
            out / "facts",
            revision=revision,
            offline=offline,
            meta_inventory=inventory,
            build_inventory=build_inventory,
        )
        if facts.tensors is None:
            click.echo(
                f"note: no tensor inventory ({facts.provenance.get('tensors_missing')}); the checkpoint guard will not apply"
            )
    result = author(facts, out, agent, budget=plan, reviewer=reviewer)
    click.echo(f"{result.stopped}; report: {out / 'report.md'}")
    for guard, status in result.final.status.items() if result.final else ():
        click.echo(f"  {guard}: {status}")
    if not result.passed:
        sys.exit(EXIT_VERDICT)


@click.command("promote")
@click.argument("draft", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The user spec folder (archsql build --specs DIR); the spec goes to DIR/models/.",
)
def promote_cmd(draft: Path, to: Path) -> None:
    """Copy the fully guarded draft of the `archsql author` output folder DRAFT into a user
    spec folder (every guard is run again first)."""
    from archsql.author.loop import promote

    path = promote(draft, to)
    click.echo(f"promoted: {path} (build it with: archsql build --specs {to})")


COMMANDS = (author_cmd, promote_cmd)  # registered lazily by name in archsql/cli.py (LAZY_COMMANDS)
