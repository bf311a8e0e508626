"""Memory of a results-file upload (issue 36, "Bounded memory"): how much a real
``lineage serve`` grows while it imports one large autoresearch file, through the JSON API
(``POST /api/v1/projects/P/trials.tsv``) and through the upload page's form.

Run: ``.venv/bin/python bench/upload_memory.py [--mib 60] [--face api|page|both]
[--backend sqlite|postgres|both]``.

For each face and backend a fresh server on a fresh database first imports a small file
through the same face (so every module the import needs is loaded, and the baseline is a
warm server's), then takes the big file. The server's peak RSS (``VmHWM`` in
``/proc/PID/status``, the kernel's own high-water mark: no sample can miss the peak)
minus its RSS just before the upload, divided by the file's size, is the figure; the
issue's target is at most 2. The load average is printed with it, and the upload's wall
time (a guide only: the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.soak import database, server  # noqa: E402

API = "/api/v1"
HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
WORDS = (
    "increase LR, switch to GeLU, add warmup, muon lr, weight decay, rope base, wider MLP, deeper model, "
    "bigger batch, qk norm, value residual, untied embeddings, cosine schedule, longer context, smaller init"
).split(", ")
TARGET_RATIO = 2.0


def make_file(path: Path, size: int, seed: int = 36) -> int:
    """An autoresearch ``results.tsv`` of about ``size`` bytes (unique commits, a falling
    best, keep/discard/crash rows with descriptions of a few ideas); returns its rows."""
    rng = random.Random(seed)
    best, rows, written = 1.0, 0, 0
    with path.open("w", encoding="utf-8", newline="") as fh:
        written += fh.write(HEADER)
        while written < size:
            rows += 1
            roll = rng.random()
            idea = " and ".join(rng.sample(WORDS, 2))
            if roll < 0.05:
                line = f"{rows:07x}\t0.000000\t0.0\tcrash\t{idea} (OOM) {rows}\n"
            elif roll > 0.92:
                best -= abs(rng.gauss(0, 0.00002))
                line = f"{rows:07x}\t{best:.6f}\t{44 + rng.random() * 4:.1f}\tkeep\t{idea} {rows}\n"
            else:
                line = (
                    f"{rows:07x}\t{best + abs(rng.gauss(0, 0.004)):.6f}\t{44 + rng.random() * 4:.1f}\tdiscard\t{idea}\n"
                )
            written += fh.write(line)
    return rows


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(size):
            yield chunk


def upload_api(base: str, project: str, path: Path) -> httpx.Response:
    return httpx.post(
        f"{base}{API}/projects/{project}/trials.tsv",
        params={"create": "true"},
        content=chunks(path),
        headers={"Content-Type": "text/tab-separated-values"},
        timeout=1800,
    )


def upload_page(base: str, project: str, path: Path) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=1800) as client:
        client.get("/upload")
        csrf = client.cookies.get("lineage_csrf") or ""
        with path.open("rb") as fh:
            return client.post(
                "/upload",
                data={"csrf": csrf, "project": project},
                files={"file": (path.name, fh, "text/tab-separated-values")},
            )


def measure(face: str, backend: str, big: Path, small: Path, size: int, rows: int) -> float:
    upload = upload_api if face == "api" else upload_page
    with tempfile.TemporaryDirectory() as tmp, database(backend, Path(tmp)) as (url, _size):
        with server(url, Path(tmp)) as (base, proc):
            warm = upload(base, "warm", small)
            assert warm.status_code in (200, 201), warm.text[-2000:]
            time.sleep(0.5)
            before = status_kib(proc.pid, "VmRSS")
            started = time.perf_counter()
            response = upload(base, "big", big)
            took = time.perf_counter() - started
            peak = status_kib(proc.pid, "VmHWM")
            after = status_kib(proc.pid, "VmRSS")
            assert response.status_code in (200, 201), response.text[-2000:]
            stored = httpx.get(f"{base}{API}/projects/big", timeout=60).json()["trial_count"]
    ratio = (peak - before) / size
    print(
        f"{face:4} {backend:8} {size / 2**20:5.1f} MiB, {rows:,} rows ({stored:,} stored) in {took:6.1f} s: "
        f"RSS {before / 2**20:6.1f} -> peak {peak / 2**20:7.1f} MiB (after {after / 2**20:6.1f}); "
        f"growth {ratio:4.2f}x the file (target <= {TARGET_RATIO:g}: {'ok' if ratio <= TARGET_RATIO else 'MISSED'}); "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=float, default=60.0, help="the big file's size in MiB (default 60)")
    parser.add_argument("--face", choices=("api", "page", "both"), default="both")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    args = parser.parse_args(argv)
    faces = ("api", "page") if args.face == "both" else (args.face,)
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    print(f"upload memory: load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "results.tsv", Path(tmp) / "small.tsv"
        rows = make_file(big, int(args.mib * 2**20))
        make_file(small, 64 * 1024)
        size = big.stat().st_size
        ratios = [measure(face, backend, big, small, size, rows) for backend in backends for face in faces]
    return 0 if all(r <= TARGET_RATIO for r in ratios) else 1


if __name__ == "__main__":
    raise SystemExit(main())
