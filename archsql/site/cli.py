"""``archsql site``: write the static site of the store (registered lazily in archsql/cli.py)."""

from __future__ import annotations

from pathlib import Path

import click

from archsql.output import console, human_bytes, plural


@click.command("site")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("site"),
    show_default=True,
    help="Folder to write the site into (index.html opens from disk, no server needed).",
)
@click.option(
    "--models",
    "-m",
    multiple=True,
    help="Only these models (repeat the option or separate with commas); default: every model in the store.",
)
@click.option(
    "--design-store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A design store written by `archsql compare` (--store): the design playground shows its comparison.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="After writing, serve the site on loopback (127.0.0.1) until Ctrl-C; it opens from disk as well.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port for --serve (0: any free one)."
)
@click.pass_obj
def site_cmd(db: Path, out: Path, models: tuple[str, ...], design_store: Path | None, serve: bool, port: int) -> None:
    """Write a static site of the store: gallery, model inspector, deployment explorer, design playground.

    Every figure is a saved query (archsql/queries/site_*.sql) or a named view, linked from the page.
    """
    from archsql.site import build_site

    names = [name.strip() for given in models for name in given.split(",") if name.strip()]
    report = build_site(db, out, names or None, design_store)
    console().print(
        f"wrote {report.pages} pages for {plural(len(report.models), 'model')} to {report.out} "
        f"({report.files} files, {human_bytes(report.bytes)}) in {report.seconds:.1f} s; "
        f"open {report.out / 'index.html'}",
        highlight=False,
    )
    if serve:
        from archsql.site.build import serve as serve_site

        server = serve_site(report.out, port)
        host, bound = server.server_address[:2]
        console().print(f"serving {report.out} at http://{host}:{bound}/ (Ctrl-C stops)", highlight=False)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


@click.command("report")
@click.argument("model")
@click.option("--deployment", "-d", required=True, help="The deployment (a row of the store's deployments table).")
@click.option(
    "--workload",
    "-w",
    default=None,
    help="The workload of the roofline (default: the deployment's first, as the explorer shows it).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "pdf"]),
    default="html",
    show_default=True,
    help="html: one self-contained file; md: tables plus SVG charts in <stem>_files/; pdf: printed by chromium.",
)
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="The file to write (default: report-<model>-<deployment>.<format>).",
)
@click.pass_obj
def report_cmd(db: Path, model: str, deployment: str, workload: str | None, fmt: str, out: Path | None) -> None:
    """Write the deployment explorer of MODEL on one deployment as one file to share.

    Memory per device by part, step time by what bounds each op, the roofline with the GPU's
    roofs, max batch vs context and the throughput frontier: the site's saved queries
    (archsql/queries/site_*.sql), each figure with its rows and its SQL.
    """
    from archsql.site.report import write_report

    written = write_report(db, model, deployment, workload, fmt, out)
    extra = f" and {plural(len(written.images), 'chart')} in {written.images[0].parent}" if written.images else ""
    console().print(
        f"wrote the {fmt} report of {model} on {deployment} to {written.path} ({human_bytes(written.bytes)}){extra}",
        highlight=False,
    )
