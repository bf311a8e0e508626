"""Projects shaped like the loops a researcher brings, for the page tests of the loop's own
words, the knob view, the exports and the phone layout (issue 35):

* ``ar-words``: an autoresearch ``results.tsv`` (``commit``, the metric ``acs`` second as
  the convention puts it, ``memory_gb``, a ``self_org_score`` named like a metric, a
  ``peak_vram_mb`` with ``-`` on crash rows, ``wd``, ``status`` keep/discard/crash,
  ``description`` saying what changed: "wd 0.01 -> 0.1"); crash rows hold ``0.000000``
  as the metric and ``-`` in the resource columns. Imported through the real import
  with no ``--metric``.
* ``fk-words``: a fieldkit ``results.tsv`` written by the ledger's own writer (specialist,
  domain, the A²TGPO clip statistics).
* ``tel-words``: trials recorded the way the trainer client records them (``extra`` with
  the client's bookkeeping ``run_id``, ``state``, ``telemetry_points``,
  ``nonfinite_dropped`` next to the real knobs ``lr`` and ``wd``) and telemetry.
"""

from __future__ import annotations

import io
import random

from lineage.domain import FailureLabel, Trial
from lineage.formats.fieldkit import write_trials
from lineage.service import Ledger

AR = "ar-words"
FK = "fk-words"
TEL = "tel-words"
AR_HEADER = "commit\tacs\tmemory_gb\tself_org_score\tpeak_vram_mb\twd\tstatus\tdescription\n"
#: the autoresearch file's status words: three, nothing else
AR_STATUSES = ("keep", "discard", "crash")


def ar_results(n: int = 120, seed: int = 35) -> str:
    """The autoresearch file's text: ``n`` rows, about 10% crashes (``0.000000`` and ``-``)."""
    rng = random.Random(seed)
    best = 0.50
    wd = 0.01
    lines = [AR_HEADER, f"{rng.getrandbits(28):07x}\t{best:.6f}\t40.1\t0.3100\t38000\t{wd}\tkeep\tbaseline\n"]
    for i in range(1, n):
        commit = f"{rng.getrandbits(28):07x}"
        new_wd = rng.choice((0.0, 0.01, 0.03, 0.1, 0.3))
        idea = f"wd {wd} -> {new_wd} (try {i})"
        roll = rng.random()
        if roll < 0.1:
            lines.append(f"{commit}\t0.000000\t-\t-\t-\t{new_wd}\tcrash\t{idea}: OOM\n")
            continue
        vram = 3700 + rng.random() * 33800
        score = rng.random()
        if roll < 0.3:
            best += abs(rng.gauss(0, 0.01)) + 1e-4
            lines.append(
                f"{commit}\t{best:.6f}\t{40 + rng.random():.1f}\t{score:.4f}\t{vram:.1f}\t{new_wd}\tkeep\t{idea}\n"
            )
            wd = new_wd
        else:
            metric = best - abs(rng.gauss(0, 0.05))
            lines.append(
                f"{commit}\t{metric:.6f}\t{40 + rng.random():.1f}\t{score:.4f}\t{vram:.1f}\t{new_wd}\tdiscard\t{idea}\n"
            )
    return "".join(lines)


def load_ar(ledger: Ledger, n: int = 120) -> None:
    ledger.files.import_file(
        AR, io.StringIO(ar_results(n), newline=""), fmt="autoresearch", source="results.tsv", create_with={}
    )


def fk_trials(n: int = 30, seed: int = 36) -> list[Trial]:
    rng = random.Random(seed)
    out = []
    best = 1.2
    for i in range(n):
        kept = i == 0 or rng.random() < 0.3
        metric = best - 0.01 if kept else best + rng.random() * 0.05
        best = metric if kept else best
        out.append(
            Trial(
                exp_id=f"{i:03d}",
                timestamp=f"2026-05-{1 + i % 28:02d}T12:{i % 60:02d}:00Z",
                specialist=rng.choice(("optim", "arch")),
                parent_exp="" if i == 0 else "000",
                domain="lm",
                hypothesis=f"fieldkit trial {i}: lr 3e-4 -> {rng.choice(('1e-3', '6e-4'))}",
                status=FailureLabel.KEEP if kept else FailureLabel.DISCARD,
                core_metric=round(metric, 6),
                val_bpb=round(metric, 6),
                train_s=100.0 + i,
                total_s=130.0 + i,
                ig_clip_scale_mean=round(0.9 + rng.random() * 0.1, 4),
                ig_clip_scale_std=round(rng.random() * 0.1, 4),
                ig_clip_scale_min=0.5,
                ig_clip_scale_max=1.0,
                ig_clip_scale_frac_low=0.01,
                ig_clip_scale_frac_high=0.02,
            )
        )
    return out


def load_fk(ledger: Ledger, n: int = 30) -> None:
    stream = io.StringIO()
    write_trials(fk_trials(n), stream)
    ledger.files.import_file(
        FK, io.StringIO(stream.getvalue(), newline=""), fmt="fieldkit", source="results.tsv", create_with={}
    )


def load_tel(ledger: Ledger, n: int = 8) -> None:
    ledger.projects.create_project(slug=TEL, metric_name="val_loss", lower_is_better=True)
    rng = random.Random(37)
    for i in range(n):
        wd = (0.0, 0.01, 0.1)[i % 3]
        lr = (3e-4, 1e-3)[i % 2]
        result = ledger.recording.record_trial(
            TEL,
            {
                "hypothesis": f"lr {lr} wd {wd}",
                "status": "keep" if i % 3 == 0 else "discard",
                "core_metric": round(2.0 + rng.random() - wd, 4),
                "extra": {
                    "run_id": f"20260101T0000{i:02d}-abc",
                    "state": "finished",
                    "telemetry_points": 40,
                    "nonfinite_dropped": 0,
                    "lr": lr,
                    "wd": wd,
                },
            },
        )
        points = [
            {"step": s, "name": name, "value": round(value, 5)}
            for s in range(0, 200, 10)
            for name, value in (("train_loss", 3.0 - s / 100 + rng.random() * 0.1), ("val_loss", 2.5 - s / 200))
        ]
        from lineage.telemetry import check_points

        ledger.telemetry.ingest_telemetry(TEL, result.trial.exp_id, check_points(points))


def load_all(ledger: Ledger, n_ar: int = 120) -> None:
    load_ar(ledger, n_ar)
    load_fk(ledger)
    load_tel(ledger)
