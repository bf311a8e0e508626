"""An autoresearch-style project as a researcher's loop leaves it, for the page tests and
``bench/web.py``: karpathy/autoresearch's ``results.tsv`` columns (``commit``, ``val_bpb``,
``memory_gb``, ``status``, ``description``), about 20% keep, a few crashes at ``0.000000``,
about 2% of discards blown up to 1.03–1.36, and LM telemetry for a few kept trials
(``train_loss`` and ``lr`` every 10 steps, ``grad_norm`` every 10, ``val_bpb`` every 250).

The file goes through the real import (:meth:`Ledger.import_file`, format ``autoresearch``),
so exp ids, parents and the stored layout are what a user gets from ``lineage import``.
"""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass

from lineage.service import Ledger

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
WORDS = (
    "increase LR",
    "switch to GeLU",
    "add warmup",
    "muon lr",
    "weight decay 0.1",
    "rope base 50k",
    "wider MLP",
    "deeper model",
    "bigger batch",
    "qk norm",
    "value residual",
    "untied embeddings",
    "cosine to zero",
    "shorter window",
    "logit softcap",
)


@dataclass(frozen=True)
class LoopProject:
    slug: str
    trials: int
    #: exp ids as the ledger shows them
    exp_ids: list[str]
    kept: list[str]
    crashed: list[str]
    #: discards whose val_bpb blew up (1.03–1.36)
    blown_up: list[str]
    #: trials that have telemetry
    with_telemetry: list[str]
    best_exp: str
    best_metric: float


def results_tsv(n: int = 2000, seed: int = 20) -> tuple[str, dict[str, list[int]]]:
    """The file's text and the row indices (0-based, header excluded) of each kind."""
    rng = random.Random(seed)
    best = 0.9979
    lines = [HEADER, f"{rng.getrandbits(28):07x}\t{best:.6f}\t44.0\tkeep\tbaseline\n"]
    kinds: dict[str, list[int]] = {"keep": [0], "crash": [], "blown_up": [], "discard": []}
    for i in range(1, n):
        commit = f"{rng.getrandbits(28):07x}"
        idea = f"{rng.choice(WORDS)} (try {i})"
        roll = rng.random()
        if roll < 0.03:
            lines.append(f"{commit}\t0.000000\t0.0\tcrash\t{idea}: OOM\n")
            kinds["crash"].append(i)
        elif roll < 0.23:
            best -= abs(rng.gauss(0, 0.0004)) + 1e-6
            lines.append(f"{commit}\t{best:.6f}\t{44 + rng.random() * 4:.1f}\tkeep\t{idea}\n")
            kinds["keep"].append(i)
        else:
            if rng.random() < 0.02:
                metric = rng.uniform(1.03, 1.36)
                kinds["blown_up"].append(i)
            else:
                metric = best + abs(rng.gauss(0, 0.003))
            kinds["discard"].append(i)
            lines.append(f"{commit}\t{metric:.6f}\t{44 + rng.random() * 4:.1f}\tdiscard\t{idea}\n")
    return "".join(lines), kinds


def lm_points(rng: random.Random, steps: int = 1000, final: float = 0.99) -> list[dict]:
    """One LM training run's telemetry as the API takes it."""
    points = []
    for step in range(0, steps + 1, 10):
        progress = step / steps
        lr = 0.02 * min(1.0, step / 100) * (1 - progress) if step else 0.0
        loss = 3.2 * math.exp(-3 * progress) + 0.9 + rng.gauss(0, 0.02)
        points.append({"step": step, "name": "train_loss", "value": round(loss, 5)})
        points.append({"step": step, "name": "lr", "value": round(lr, 7)})
        points.append({"step": step, "name": "grad_norm", "value": round(abs(rng.gauss(1.0, 0.3)), 4)})
        if step % 250 == 0:
            points.append(
                {
                    "step": step,
                    "name": "val_bpb",
                    "value": round(final + 0.5 * (1 - progress) ** 2 + rng.gauss(0, 0.002), 5),
                }
            )
    return points


def load_loop_project(
    ledger: Ledger, slug: str = "ar-loop", n: int = 2000, seed: int = 20, telemetry_trials: int = 4
) -> LoopProject:
    """Import the generated ``results.tsv`` into a new project ``slug`` and give the last
    ``telemetry_trials`` kept trials telemetry; answer what was made."""
    text, kinds = results_tsv(n, seed)
    ledger.files.import_file(
        slug,
        io.StringIO(text, newline=""),
        fmt="autoresearch",
        source="results.tsv",
        create_with={"lower_is_better": True},
    )
    trials = list(ledger.tables.stream_trials(slug))
    exp_ids = [trial.exp_id for trial in trials]
    assert len(exp_ids) == n, (len(exp_ids), n)
    ids = {kind: [exp_ids[i] for i in rows] for kind, rows in kinds.items()}
    rng = random.Random(seed + 1)
    with_telemetry = ids["keep"][-telemetry_trials:] if telemetry_trials else []
    for exp_id in with_telemetry:
        ledger.telemetry.ingest_telemetry(slug, exp_id, _rows(lm_points(rng)))
    best = ledger.trials.best(slug)
    return LoopProject(
        slug=slug,
        trials=n,
        exp_ids=exp_ids,
        kept=ids["keep"],
        crashed=ids["crash"],
        blown_up=ids["blown_up"],
        with_telemetry=with_telemetry,
        best_exp=best.exp_id,
        best_metric=float(best.core_metric),
    )


def _rows(points: list[dict]):
    from lineage.telemetry import check_points

    return check_points(points)
