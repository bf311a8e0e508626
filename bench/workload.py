"""The ingest workload of issue 23, shared by ``bench/api.py`` and its peers.

5,000 trials (``--trials``), each with a 200-character hypothesis drawn from a 40-word ML
vocabulary (so texts overlap heavily, as a long loop's do), a fieldkit status mix with
about 30% keep, sent by 4 client threads over keep-alive HTTP (``http.client``, one
connection per thread). Deterministic: trial ``i`` is the same in every run.

CPU accounting: :class:`CpuClock` reads the CPU seconds of this process (the client
threads) and of the server's process (``/proc/<pid>/stat``) around a measurement, so a
rate can be given per CPU-second beside the wall rate (the machine is shared).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: 40 words of an ML loop's hypotheses.
VOCABULARY: tuple[str, ...] = tuple(
    """
learning rate warmup cosine schedule decay weight batch size layer norm attention head dropout
residual scale embedding init optimizer adam momentum beta gradient clip loss label smoothing
depth width rotary softcap logit muon matrix value token mixing ema steps tied
""".split()
)
assert len(VOCABULARY) == 40, len(VOCABULARY)
#: fieldkit's statuses with about 30% keep.
STATUS_MIX: tuple[tuple[str, int], ...] = (
    ("keep", 30),
    ("discard", 45),
    ("crash", 10),
    ("eval_budget_overrun", 5),
    ("train_budget_overrun", 5),
    ("preflight_crash", 5),
)
HYPOTHESIS_CHARS = 200
CLIENT_THREADS = 4


def hypothesis(rng: random.Random) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < HYPOTHESIS_CHARS:
        words.append(rng.choice(VOCABULARY))
    return " ".join(words)[:HYPOTHESIS_CHARS]


def trial(i: int) -> dict[str, Any]:
    """Trial ``i`` of the workload (no exp_id: the server allocates it)."""
    rng = random.Random(i)
    statuses, weights = zip(*STATUS_MIX)
    status = rng.choices(statuses, weights)[0]
    metric = None if status in ("crash", "preflight_crash") else round(1.0 - i * 1e-5 + rng.uniform(-0.01, 0.01), 6)
    body: dict[str, Any] = {"status": status, "hypothesis": hypothesis(rng), "specialist": "bench"}
    if metric is not None:
        body["core_metric"] = metric
    return body


def trials(count: int, first: int = 0) -> list[dict[str, Any]]:
    return [trial(i) for i in range(first, first + count)]


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


@dataclass
class Measured:
    """What one measurement took: items, wall seconds, CPU seconds (client + server), load."""

    items: int
    wall: float
    cpu: float
    load: float

    @property
    def rate(self) -> float:
        return self.items / self.wall

    @property
    def per_cpu(self) -> float:
        return self.items / self.cpu if self.cpu > 0 else float("nan")

    def line(self, unit: str = "trials") -> str:
        return (
            f"{self.rate:9,.0f} {unit}/s wall   {self.per_cpu:9,.0f} {unit}/CPU-s   "
            f"(load {self.load:.2f}, {self.items:,} in {self.wall:.2f} s, {self.cpu:.2f} CPU-s)"
        )


class CpuClock:
    """Wall and CPU seconds of this process and ``pids`` between start() and stop()."""

    def __init__(self, pids: Sequence[int] = ()) -> None:
        self.pids = list(pids)

    def _cpu(self) -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system + sum(proc_cpu(p) for p in self.pids)

    def __enter__(self) -> CpuClock:
        self.t0, self.c0 = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = self._cpu() - self.c0
        self.load = os.getloadavg()[0]

    def measured(self, items: int) -> Measured:
        return Measured(items, self.wall, self.cpu, self.load)


def post_parallel(
    port: int,
    path: str,
    bodies: Sequence[Any],
    *,
    threads: int = CLIENT_THREADS,
    expect: tuple[int, ...] = (201,),
    check: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """POST every body (JSON) to ``path``, ``threads`` keep-alive connections at once,
    each taking the next body; every answer must have a status in ``expect``."""
    lock = threading.Lock()
    position = iter(range(len(bodies)))
    errors: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            while True:
                with lock:
                    i = next(position, None)
                if i is None or errors:
                    return
                conn.request(
                    "POST", path, body=json.dumps(bodies[i]).encode(), headers={"Content-Type": "application/json"}
                )
                response = conn.getresponse()
                data = response.read()
                if response.status not in expect:
                    errors.append(f"{response.status}: {data[:300]!r}")
                    return
                if check is not None:
                    check(json.loads(data))
        finally:
            conn.close()

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise SystemExit(f"ingest failed: {errors[0]}")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
