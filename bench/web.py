"""Web page benchmarks in a real browser (issue 20). Run: ``.venv/bin/python bench/web.py``.

Builds an autoresearch-style loop of ``--trials`` trials (default 100,000; the generator
of ``tests/web/loop_project.py``: commit, val_bpb, memory_gb, keep/discard/crash,
blow-ups, LM telemetry for a few kept trials) through the real import, on a fresh SQLite
file (and on PostgreSQL with ``--postgres URL``), starts a real ``lineage serve`` on it
and opens every page kind in a cold Chromium context (Playwright, /usr/bin/chromium: no
cache, no cookies), ``--repeat`` times each. Reports per page, as medians: first
contentful paint (the browser's performance API), time to the first byte, bytes
transferred (the page and everything it loads, as sent: gzipped) and the HTML size;
with the load average of the machine at each page (the load is shared).

Targets: first contentful paint <= 0.5 s and <= 1 MB transferred, every page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lineage.service import Ledger  # noqa: E402
from tests.servers import serving  # noqa: E402
from tests.web.loop_project import load_loop_project  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
FCP_TARGET_S = 0.5
BYTES_TARGET = 1_000_000
SLUG = "ar-loop"

#: What the page reports once loaded: paint, first byte, bytes over the wire, HTML size.
MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const res = performance.getEntriesByType('resource');
  return {fcp: fcp ? fcp.startTime : null, ttfb: nav.responseStart,
          bytes: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0), html: nav.decodedBodySize};
}"""


def pages(made, filter_param: bool) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    n, best, latest = made.trials, made.best_exp, made.exp_ids[-1]
    middle = made.exp_ids[n // 2]
    tele = made.with_telemetry[-1]
    filtered = (
        f"/projects/{SLUG}/trials?filter=status%3D%3D%27keep%27%20and%20extra.memory_gb%3E46"
        if filter_param
        else f"/projects/{SLUG}/trials?status=keep&q=warmup&sort=metric&order=asc"
    )
    return [
        ("index", "/"),
        ("dashboard", f"/projects/{SLUG}"),
        ("dashboard, earlier window", f"/projects/{SLUG}?before={n // 2}"),
        ("chain to the best", f"/projects/{SLUG}/chain"),
        ("chain, its last page", f"/projects/{SLUG}/chain?offset={n}"),  # clamped to the page of the best
        ("tree (top)", f"/projects/{SLUG}/tree"),
        ("tree (focus on the best)", f"/projects/{SLUG}/tree?focus={best}"),
        ("trials table", f"/projects/{SLUG}/trials"),
        ("trials table, by metric", f"/projects/{SLUG}/trials?sort=metric"),
        ("trials table, filtered", filtered),
        ("trials table, picked columns", f"/projects/{SLUG}/trials?cols=exp_id,status,val_bpb,extra.memory_gb"),
        ("trial page", f"/projects/{SLUG}/trials/{middle}"),
        ("trial page (telemetry)", f"/projects/{SLUG}/trials/{tele}"),
        ("compare 3 trials", f"/projects/{SLUG}/compare?exp={best}&exp={middle}&exp={latest}"),
        ("calibration", f"/projects/{SLUG}/calibration"),
        ("explore", f"/projects/{SLUG}/explore"),
        ("knobs (memory_gb)", f"/projects/{SLUG}/knobs"),
        ("knobs (commit, categories)", f"/projects/{SLUG}/knobs?x=extra.commit"),
        (
            "knobs (telemetry, parallel)",
            f"/projects/{SLUG}/knobs?x=telemetry.train_loss.last&log=1&axes=extra.memory_gb,telemetry.lr.last",
        ),
    ]


def build(db: str, n: int) -> object:
    ledger = Ledger.open(db)
    start = time.perf_counter()
    made = load_loop_project(ledger, slug=SLUG, n=n)
    took = time.perf_counter() - start
    if not ledger.store.sqlite:  # what autovacuum does within a minute of a bulk import
        from sqlalchemy import text

        with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    ledger.close()
    print(f"  {n:,} trials imported in {took:.1f} s (load average {os.getloadavg()[0]:.2f})")
    return made


def measure(base: str, made, repeat: int, filter_param: bool) -> bool:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    ok = True
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        print(f"  {'page':32s} {'FCP':>8s} {'TTFB':>8s} {'sent':>9s} {'HTML':>9s}  load  verdict")
        for name, url in pages(made, filter_param):
            runs = []
            for _ in range(repeat):
                context = browser.new_context(viewport={"width": 1280, "height": 800})  # cold: no cache
                page = context.new_page()
                response = page.goto(base + url, wait_until="load", timeout=120_000)
                assert response is not None and response.status == 200, (url, response and response.status)
                deadline = time.monotonic() + 30  # the paint entry may come just after load
                while (found := page.evaluate(MEASURE))["fcp"] is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert found["fcp"] is not None, f"{url}: no first-contentful-paint entry"
                runs.append(found)
                context.close()
            fcp = statistics.median(r["fcp"] for r in runs) / 1000
            ttfb = statistics.median(r["ttfb"] for r in runs) / 1000
            sent = statistics.median(r["bytes"] for r in runs)
            html = statistics.median(r["html"] for r in runs)
            passed = fcp <= FCP_TARGET_S and sent <= BYTES_TARGET
            ok &= passed
            print(
                f"  {name:32s} {fcp:7.3f}s {ttfb:7.3f}s {sent / 1024:7.0f}KiB {html / 1024:7.0f}KiB "
                f"{os.getloadavg()[0]:5.2f}  {'ok' if passed else 'MISSED'}"
            )
        browser.close()
    return ok


def run(db: str, label: str, n: int, repeat: int, filter_param: bool, workdir: Path) -> bool:
    print(f"\n[{label}]")
    made = build(db, n)
    with serving(workdir, "--db", db) as base:
        return measure(base, made, repeat, filter_param)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="also run on this PostgreSQL URL (an empty database)")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--filter", action="store_true", help="the filtered table uses ?filter= (the filter language)")
    args = parser.parse_args()
    print(
        f"bench/web.py: {args.trials:,} trials, {args.repeat} cold loads a page, Chromium {CHROMIUM}; "
        f"targets: FCP <= {FCP_TARGET_S} s, <= {BYTES_TARGET / 1e6:g} MB a page"
    )
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_sqlite:
            ok &= run(str(Path(tmp) / "web.db"), "SQLite", args.trials, args.repeat, args.filter, Path(tmp))
        if args.postgres:
            ok &= run(args.postgres, "PostgreSQL", args.trials, args.repeat, args.filter, Path(tmp))
    print("\nall targets met" if ok else "\nsome targets MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
