"""A trainer in its own process, for the SIGKILL and SIGTERM tests: logs steps forever
and, every ``every`` steps, makes sure the points so far reached the spool and says so
on stdout (``spooled <steps>``). The test signals it at a moment of its choosing.

    python -m tests.trainer_hooks.client.trainer_process URL SPOOL_DIR PROJECT EVERY [plain|recorder]

``recorder``: inside a :class:`TrialRecorder` with ``handle_sigterm``, so SIGTERM unwinds
the loop, labels the trial and flushes before the process exits.
"""

from __future__ import annotations

import sys
import time

from tests.trainer_hooks.client.conftest import fast_client, log_steps
from trainer_hooks.callbacks import TrialRecorder
from trainer_hooks.client import LedgerClient


def train_forever(client: LedgerClient, every: int) -> None:
    step = 0
    while True:
        log_steps(client, range(step, step + every))
        step += every
        client.flush(timeout=0)  # returns at once; what matters is that the points are spooled
        print(f"spooled {step}", flush=True)
        time.sleep(0.01)


def main() -> None:
    url, spool_dir, project, every = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    mode = sys.argv[5] if len(sys.argv) > 5 else "plain"
    client = fast_client(
        url, spool_dir, project, run_id=f"{mode}-run", handle_sigterm=mode == "recorder", close_timeout=120.0
    )  # an upper bound: a busy machine is slow
    client.ensure_project(lower_is_better=True)
    if mode == "recorder":
        with TrialRecorder(client, hypothesis="terminated mid-run"):
            train_forever(client, every)
    client.plan_trial(hypothesis="killed mid-run")
    train_forever(client, every)


if __name__ == "__main__":
    main()
