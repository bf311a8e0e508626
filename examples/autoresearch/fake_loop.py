"""A fake autoresearch loop: appends one experiment to results.tsv every few hundred ms.

It writes what karpathy/autoresearch's agent writes -- ``commit  val_bpb  memory_gb
status  description``, tab-separated, one line per experiment -- with keeps (the branch
advances), discards (it resets) and crashes (``0.000000`` and ``0.0``: no result). Run it
next to ``lineage watch`` to see rows arrive in the ledger (see README.md).

    python examples/autoresearch/fake_loop.py results.tsv --every 0.3 --count 60
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
IDEAS = [
    "increase matrix LR to 0.04",
    "switch MLP to GeLU",
    "add 200 warmup steps",
    "muon momentum 0.95",
    "weight decay 0.1 on embeddings",
    "rope base 50k",
    "wider MLP (4x -> 5x)",
    "one more layer",
    "batch 2x with grad accumulation",
    "qk-norm",
    "value residual",
    "untie embeddings",
    "logit soft-capping",
    "shorter cooldown",
    "z-loss 1e-4",
    "smaller init std",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", default=Path("results.tsv"))
    parser.add_argument("--every", type=float, default=0.3, help="seconds between experiments")
    parser.add_argument("--count", type=int, default=60, help="experiments to run (0: forever)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if not args.path.exists() or args.path.stat().st_size == 0:
        args.path.write_text(HEADER, encoding="utf-8")
    best = 1.0
    done = 0
    while args.count == 0 or done < args.count:
        commit = f"{rng.getrandbits(28):07x}"
        idea = rng.choice(IDEAS)
        roll = rng.random()
        if done == 0:
            line = f"{commit}\t{best:.6f}\t44.0\tkeep\tbaseline\n"
        elif roll < 0.12:
            line = f"{commit}\t0.000000\t0.0\tcrash\t{idea} (OOM)\n"
        else:
            val_bpb = best + rng.gauss(0.002, 0.004)
            status = "keep" if val_bpb < best else "discard"
            if status == "keep":
                best = val_bpb
            line = f"{commit}\t{val_bpb:.6f}\t{44 + rng.random() * 3:.1f}\t{status}\t{idea}\n"
        with args.path.open("a", encoding="utf-8", newline="") as fh:  # one write per line, as agents do
            fh.write(line)
        print(line, end="", flush=True)
        done += 1
        time.sleep(args.every)


if __name__ == "__main__":
    main()
