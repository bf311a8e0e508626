"""The ingest workload (bench/workload.py) logged with trackio, in its own venv:
``/tmp/peers/trackio/bin/python bench/peers/trackio_trials.py COUNT DIR``; prints one JSON
line ``{"items", "wall", "cpu"}``. Each trial is one trackio run (``init`` with the
trial's fields as config, ``log`` of its metric, ``finish``), written in process to
trackio's SQLite store under DIR (``TRACKIO_DIR``): trackio's cheapest way to keep what
the ledger keeps per trial. One thread (trackio's current run is process-global)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
count, where = int(sys.argv[1]), sys.argv[2]
os.environ["TRACKIO_DIR"] = where
os.environ.setdefault("TRACKIO_DISABLE_TELEMETRY", "1")

import trackio  # noqa: E402

from bench.workload import trials  # noqa: E402

bodies = trials(count)
warm = trackio.init(project="warm", name="w", embed=False)
trackio.log({"x": 1.0})
trackio.finish()
t0, c0 = time.perf_counter(), time.process_time()
for i, body in enumerate(bodies):
    trackio.init(
        project="bench", name=f"t{i}", config={k: v for k, v in body.items() if k != "core_metric"}, embed=False
    )
    trackio.log({"core_metric": body.get("core_metric", float("nan"))})
    trackio.finish()
print(json.dumps({"items": count, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
