"""Metric explorer benchmark (issue 12). Run: ``.venv/bin/python bench/explorer.py``.

Builds a project of ``--trials`` trials (default 50) with ``--points`` telemetry points
each (default 100,000; one ``loss`` series, not per turn) on a fresh SQLite file, through
the store's telemetry path (``lineage.telemetry.ingest``: ``executemany``), then measures:

* the explore JSON server-side: ``GET /api/v1/projects/{p}/explore`` through the real ASGI
  app in-process, grouped by specialist (best and median of ``--repeat``), with its size;
  next to it, in the same run, the exact rule forced on the same view (every point read
  by one GROUP BY): the ratio is what the sampled rule saves;
* with ``--browser``: a real ``lineage serve`` and Chromium (Playwright, a cold context
  per run): the time from navigation to the first curve drawn (``svg.explore-svg path``).

Targets: JSON <= 300 ms, <= 1 MB; first curves <= 1.5 s after navigation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lineage.domain import FailureLabel, Trial  # noqa: E402
from lineage.service import Ledger  # noqa: E402
from tests import servers  # noqa: E402

SPECIALISTS = ("a2tgpo", "gspo", "ppo")
JSON_TARGET_MS = 300.0
JSON_TARGET_BYTES = 1_000_000
PAINT_TARGET_S = 1.5


def generate_project(ledger: Ledger, slug: str, *, trials: int, points: int, turns: int = 0, seed: int = 1) -> None:
    """A project of ``trials`` trials: specialists in turn (``SPECIALISTS``), a chain of
    keeps with discards off it, ``extra.lr``; each trial holds ``points`` steps of
    ``loss`` (a noisy decaying curve whose level depends on the specialist) with
    ``wall_time``, and, with ``turns``, ``ig`` per turn at every 10th step."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ledger.projects.create_project(slug, lower_is_better=True)
    rows: list[Trial] = []
    tip = ""
    for i in range(trials):
        keep = i == 0 or i % 3 == 0
        exp_id = f"{i:03d}"
        rows.append(
            Trial(
                exp_id=exp_id,
                status=FailureLabel.BASELINE if i == 0 else (FailureLabel.KEEP if keep else FailureLabel.DISCARD),
                core_metric=round(2.0 - 0.01 * i + (0 if keep else 0.05), 6),
                specialist=SPECIALISTS[i % len(SPECIALISTS)],
                parent_exp=tip,
                domain="rl",
                hypothesis=f"trial {i}",
                extra={"lr": [1e-4, 3e-4][i % 2]},
            )
        )
        if keep:
            tip = exp_id
    ledger.tables.import_trials(slug, iter(rows))
    steps = np.arange(points)
    for i, trial in enumerate(rows):
        level = 1.0 + SPECIALISTS.index(trial.specialist) * 0.5
        values = level * np.exp(-steps / max(1, points / 3)) + 0.05 * rng.standard_normal(points) + 0.001 * i
        wall = 1.7e9 + i * 1000.0 + steps * (0.5 + 0.1 * (i % 3))
        batch = list(zip(steps.tolist(), [-1] * points, ["loss"] * points, values.tolist(), wall.tolist()))
        if turns:
            sub = steps[::10]
            for turn in range(turns):
                ig = (turn + 1) * 0.1 + 0.01 * rng.standard_normal(sub.size)
                batch.extend(zip(sub.tolist(), [turn] * sub.size, ["ig"] * sub.size, ig.tolist(), [None] * sub.size))
        ledger.telemetry.ingest_telemetry(slug, trial.exp_id, batch)


def serving(db: str) -> AbstractContextManager[str]:
    """A real ``lineage serve --db DB`` on a free loopback port, until the block ends:
    its base URL once it answers."""
    return servers.serving(None, "--db", db)


def bench_json(db: str, slug: str, repeat: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.schemas import ExploreArgs
    from api.settings import Settings

    url = f"/api/v1/projects/{slug}/explore?metric=loss&group=specialist"
    with TestClient(create_app(Settings(database_url=db))) as client:
        client.get(url)  # warm: imports, the database's pages in the OS cache
        times, size = [], 0
        for _ in range(repeat):
            start = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text
            size = len(response.content)
        body = response.json()
        ledger = client.app.state.ledger
        query = ExploreArgs(metric=["loss"], group="specialist").to_query()
        exact_query = type(query)(**{**query.__dict__, "exact_budget": 10**12})
        exact_times = []
        for _ in range(max(1, repeat // 3)):
            start = time.perf_counter()
            ledger.browse.explore(slug, exact_query)
            exact_times.append(time.perf_counter() - start)
        sampled_direct = []
        for _ in range(max(1, repeat // 3)):
            start = time.perf_counter()
            ledger.browse.explore(slug, query)
            sampled_direct.append(time.perf_counter() - start)
    return {
        "best": min(times),
        "median": statistics.median(times),
        "bytes": size,
        "method": body["panels"][0]["downsampling"],
        "exact_best": min(exact_times),
        "sampled_best": min(sampled_direct),
    }


def bench_browser(db: str, slug: str, repeat: int) -> list[float]:
    import httpx
    from playwright.sync_api import sync_playwright

    with serving(db) as base:
        httpx.get(f"{base}/projects/{slug}/explore?metric=loss&group=specialist", timeout=30)  # server warm
        out = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            for _ in range(repeat):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                start = time.perf_counter()
                page.goto(f"{base}/projects/{slug}/explore?metric=loss&group=specialist", wait_until="commit")
                page.locator("svg.explore-svg path.ln").first.wait_for(state="visible", timeout=30_000)
                out.append(time.perf_counter() - start)
                context.close()
            browser.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--browser", action="store_true", help="also time the first curves in Chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "explore.db")
        ledger = Ledger.open(db)
        start = time.perf_counter()
        generate_project(ledger, "explore", trials=args.trials, points=args.points)
        built = time.perf_counter() - start
        ledger.close()
        total = args.trials * args.points
        print(
            f"generated {args.trials} trials x {args.points:,} points = {total:,} points in {built:.1f} s "
            f"({total / built:,.0f} points/s, through lineage.telemetry.ingest)"
        )
        result = bench_json(db, "explore", args.repeat)
        ok = result["best"] * 1000 <= JSON_TARGET_MS and result["bytes"] <= JSON_TARGET_BYTES
        print(
            f"explore JSON (HTTP, in-process): best {result['best'] * 1000:.0f} ms, median {result['median'] * 1000:.0f} ms, "
            f"{result['bytes'] / 1e6:.2f} MB, {result['method']} "
            f"(target <= {JSON_TARGET_MS:.0f} ms, <= 1 MB: {'ok' if ok else 'MISSED'})"
        )
        print(
            f"same view, exact rule forced (every point read): best {result['exact_best'] * 1000:.0f} ms; "
            f"sampled rule: best {result['sampled_best'] * 1000:.0f} ms "
            f"(exact / sampled = {result['exact_best'] / result['sampled_best']:.1f}x)"
        )
        if args.browser:
            paints = bench_browser(db, "explore", max(3, args.repeat // 3))
            best = min(paints)
            print(
                f"first curves in Chromium (cold context): best {best:.2f} s, median {statistics.median(paints):.2f} s "
                f"(target <= {PAINT_TARGET_S} s: {'ok' if best <= PAINT_TARGET_S else 'MISSED'})"
            )


if __name__ == "__main__":
    main()
