"""Site benchmark and screenshots (not a test): build the static site of a store, report its
build time and size, open the gallery in headless chromium from file:// and time it until its
charts are drawn, and write a screenshot of each page to docs/site/.

Targets (issue 16) on 2 shared cores: full-catalog site build < 30 s; the gallery of 41+ models
open (page load until every chart is drawn) < 2 s.

    PYTHONPATH=. python benchmarks/site_screens.py --db /tmp/catalog.duckdb      # a built catalog store
    PYTHONPATH=. python benchmarks/site_screens.py                               # builds the catalog first
    PYTHONPATH=. python benchmarks/site_screens.py --db S --model Qwen3-30B-A3B --shots docs/site

The explorer shot plots a saved sweep's frontier and the playground shot an edit, an audit
card and a comparison when the stores hold them (docs/site/*.png were made so):

    archsql --db /tmp/catalog.duckdb sweep DeepSeek-V3 --layout tp8,ep8 --layout dp8,ep8 \
        --layout tp4,dp2,ep8 --layout tp2,dp4,ep8 --weights native --batch 1,16,64,256 --context 8k --save layouts
    archsql edit Meta-Llama-3.1-8B --swap attention=gated_deltanet --dims-from Qwen3.5-27B \
        --name Llama-3.1-8B+deltanet --context 32k --store /tmp/design.duckdb
    archsql edit Meta-Llama-3.1-8B --set n_kv_heads=4 --name llama-kv4 --store /tmp/design.duckdb
    archsql audit Meta-Llama-3.1-8B designs/llama-kv4.yaml --changed-field num_key_value_heads \
        --budget kv_bytes_per_token=0 --store /tmp/design.duckdb
    archsql compare attention -C gqa_attention@Meta-Llama-3.1-8B -C mla_attention@DeepSeek-V3 \
        -C gated_deltanet@Qwen3.5-27B --d-model 4096 --context 2k,32k,128k --store /tmp/design.duckdb
    PYTHONPATH=. python benchmarks/site_screens.py --db /tmp/catalog.duckdb --design-store /tmp/design.duckdb
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"build_s": 30.0, "gallery_open_s": 2.0}
ROOT = Path(__file__).resolve().parents[1]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    sys.exit("no chromium on this machine: apt-get install chromium")


def _verdict(name: str, value: float) -> str:
    return "[pass]" if value < TARGETS[name] else "[FAIL]"


def main() -> int:
    from archsql.api import build
    from archsql.site import build_site
    from archsql.site.build import slug

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, help="a built store (default: build the whole catalog into a temp store)")
    ap.add_argument("--model", default="DeepSeek-V3", help="the model whose inspector and explorer are shot")
    ap.add_argument("--deployment", default="8xH200-tp8-ep8", help="the deployment the explorer shot selects")
    ap.add_argument("--design-store", type=Path, help="a design store of `archsql compare` for the playground shot")
    ap.add_argument("--shots", type=Path, default=ROOT / "docs" / "site", help="screenshot folder")
    ap.add_argument("--repeat", type=int, default=3, help="gallery opens timed (best is reported)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="archsql-site-"))
    db = args.db
    if db is None:
        db = tmp / "catalog.duckdb"
        t = time.perf_counter()
        build(None, db=db)
        print(f"{'store build':>16}: {time.perf_counter() - t:6.1f} s (the whole catalog)")

    out = tmp / "site"
    report = build_site(db, out, design_db=args.design_store)
    print(
        f"{'site build':>16}: {report.seconds:6.1f} s for {len(report.models)} models, {report.pages} pages, "
        f"{report.files} files, {report.bytes / 2**20:.1f} MiB {_verdict('build_s', report.seconds)}"
    )
    files = [p for p in (out / "data").rglob("*.js")]
    data = sum(p.stat().st_size for p in files)
    print(
        f"{'of which data':>16}: {data / 2**20:6.1f} MiB; vega bundle {(out / 'assets' / 'vega.js').stat().st_size / 2**20:.1f} MiB"
    )
    # what one explorer opening reads: its page file and the file of the deployment it shows first
    pages = [p for p in files if p.parent.name == "data" and p.name.startswith("deploy-")]
    largest = max(pages, key=lambda p: p.stat().st_size)
    chunks = sorted(largest.with_suffix("").iterdir(), key=lambda p: p.stat().st_size) if pages else []
    print(
        f"{'explorer data':>16}: largest page file {largest.stat().st_size / 2**10:.0f} KiB ({largest.stem}), "
        f"its deployments' files {chunks[0].stat().st_size / 2**10:.0f}–{chunks[-1].stat().st_size / 2**10:.0f} KiB"
    )

    from playwright.sync_api import sync_playwright

    args.shots.mkdir(parents=True, exist_ok=True)
    shots = {
        "gallery.png": ("index.html", None),
        "inspector.png": (f"model/{slug(args.model)}.html", None),
        "deployment.png": (f"deploy/{slug(args.model)}.html", args.deployment),
        "design.png": ("design.html", None),
        "sql.png": ("sql/site_gallery.html", None),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            page.goto((out / "index.html").as_uri())
            page.wait_for_function("Number(document.body.dataset.ready || 0) >= 1", timeout=60_000)
            times.append(time.perf_counter() - t)
        best = min(times)
        print(
            f"{'gallery open':>16}: best {best:.2f} s of {args.repeat} ({report.models and len(report.models)} models) {_verdict('gallery_open_s', best)}"
        )
        for name, (path, deployment) in shots.items():
            page.goto((out / path).as_uri())
            page.wait_for_function("!window.ARCHSQL || Number(document.body.dataset.ready || 0) >= 1", timeout=60_000)
            if deployment:
                page.select_option("#filter-deployment", deployment)
                page.wait_for_function("Number(document.body.dataset.ready || 0) >= 2", timeout=60_000)
            if path.startswith("model/"):
                page.evaluate("() => document.querySelectorAll('details.component')[0]?.setAttribute('open', '')")
            page.screenshot(path=str(args.shots / name), full_page=True)
            print(f"{'screenshot':>16}: {args.shots / name}")
        browser.close()
    if errors:
        print("console errors:", *errors, sep="\n  ")
    shutil.rmtree(tmp, ignore_errors=True)
    ok = report.seconds < TARGETS["build_s"] and best < TARGETS["gallery_open_s"] and not errors
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
