"""Concepts, not only spellings: the words people use for an ML knob when they do not
spell it (``lineage.similar.SPELLINGS`` holds the spellings).

"bigger batch" and ``TOTAL_BATCH_SIZE 2**20`` are one idea, as are "deeper model" and
"switch to 16 layers", and "wider" and ``n_embd``. Each concept of :data:`CONCEPTS` is a
concept of the spelling table (or a new one), with the words and phrases that name it;
``lineage.similar`` reads both tables as one, so a query, a stored trial's concepts, a
sketch and a knob's normalised name (``lineage.knobs.knob_name``) all see ``deeper`` as
``nlayers``. Comparative words ("bigger", "more") stay words of their own: "bigger
batch" is ``bigger bs``, close to every batch-size trial and to no other.

A phrase never starts with a word that begins a knob's name ("device batch" would make
``DEVICE_BATCH_SIZE`` "bs size"). A word goes here only when it names one knob and nothing
else in an ML loop's text:
``clip`` is left out (gradient clipping and PPO's clip range), so is ``decay`` (weight
decay and a learning-rate schedule).
"""

from __future__ import annotations

__all__ = ["CONCEPTS"]

#: concept -> words and phrases that name it (split into tokens like any text); the
#: longest phrase at a position wins over a shorter one, across both tables
CONCEPTS: dict[str, tuple[str, ...]] = {
    "bs": ("batch", "batches", "tokens per step", "tokens per batch"),
    "nlayers": (
        "layers",
        "deeper",
        "deepen",
        "deepening",
        "shallower",
        "deeper model",
        "deeper network",
        "deeper net",
        "shallower model",
        "model depth",
        "network depth",
        "transformer blocks",
        "num blocks",
        "n blocks",
    ),
    "dmodel": (
        "wider",
        "widen",
        "widening",
        "narrower",
        "hidden",
        "embd",
        "model width",
        "channels",
        # "model" alone is close to "dmodel" (fuzzy): the phrase is one concept
        "wider model",
        "wider network",
        "narrower model",
    ),
    "nheads": ("heads", "attention heads", "num attention heads"),
    "seqlen": (
        "seq",
        "longer context",
        "shorter context",
        "context size",
        "context len",
        "longer sequences",
        "shorter sequences",
        "sequence len",
        "tokens per sequence",
    ),
    "iters": (
        "iterations",
        "iteration",
        "iters",
        "max iters",
        "num iterations",
        "training steps",
        "train steps",
        "max steps",
        "num steps",
        "total steps",
        "step count",
    ),
    "warmdown": ("warm down", "cooldown", "cool down", "lr cooldown", "lr decay", "decay phase", "annealing"),
    "moe": ("experts", "num experts", "n experts", "expert count"),
    "rope": ("rotary",),
    "ema": ("moving average",),
    "params": ("model size", "parameter budget", "param budget"),
}
