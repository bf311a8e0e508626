"""The noise floor of a project and the verdicts said against it: is a delta real, or noise?

Pure values and rules, no I/O (the store reads the reruns, ``lineage.store.repeats``).

**Reruns.** Trials that ran the same code are repeats of one another; a trial's *repeat
keys* (:func:`code_keys`, and ``rerun_of``) say which:

1. a declared ``rerun_of`` (a trial of the same project);
2. the same commit (``extra.commit``, else ``extra._git.sha``);
3. the same patch (``extra._git.patch``: its ``index`` lines name the changed files'
   contents before and after, so the same patch is the same change to the same files);
4. a ``baseline`` with neither: every such baseline is a repeat of the project's baseline.

Trials linked by any of these, directly or through others, form one group of repeats.

**σ, the noise floor** (:func:`pooled_sigma`): the pooled standard deviation of the
groups of repeats that hold two or more scored trials (status keep, discard or baseline,
with a metric): ``σ² = Σ_g Σ_i (x_gi − mean_g)² / Σ_g (n_g − 1)``. ``Σ_g (n_g − 1)`` is
the number of *reruns* it rests on (the first trial of a group is the original). A
project setting can replace it (``noise_sigma``); ``noise_k`` (default 2) is the
multiple: a delta with ``|Δ| < k·σ`` is *within noise*.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.errors import InvalidInput

#: Project settings (``project.settings``): σ by hand, the multiple k, and whether
#: ``status: "auto"`` keeps only above noise.
SIGMA_SETTING = "noise_sigma"
K_SETTING = "noise_k"
AUTO_SETTING = "auto_keep_above_noise"
DEFAULT_K = 2.0
MAX_K = 100.0
#: Statuses whose metric measures the code (a crash's or an abort's does not).
SCORED_STATUSES = ("keep", "discard", "baseline")
#: With no σ, a keep gaining less than this fraction of the best's magnitude is marginal:
#: the answer suggests a rerun before building on it.
MARGINAL_FRACTION = 0.005
#: Longest repeat key (the column is 200 characters wide).
MAX_KEY = 200


def check_sigma(value: object) -> float:
    """A hand-set σ: a finite number > 0; :class:`InvalidInput` naming ``noise_sigma``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInput(SIGMA_SETTING, f"must be a finite number > 0, got {value!r}")
    return float(value)


def check_k(value: object) -> float:
    """The multiple of σ: a number > 0 and at most :data:`MAX_K`; naming ``noise_k``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_K:
        raise InvalidInput(K_SETTING, f"must be a number > 0 and at most {MAX_K:g}, got {value!r}")
    return float(value)


def check_auto(value: object) -> bool:
    """``auto_keep_above_noise``: true or false; naming it."""
    if not isinstance(value, bool):
        raise InvalidInput(AUTO_SETTING, f"must be true or false, got {value!r}")
    return value


def code_keys(status: str, extra: Mapping[str, Any]) -> list[str]:
    """A trial's repeat keys from what it carries (rules 2-4 of the module doc): its
    commit and its patch; a baseline with neither, ``baseline``. Trials sharing any key
    ran the same code."""
    keys: list[str] = []
    git = extra.get("_git")
    git = git if isinstance(git, Mapping) else {}
    commit = extra.get("commit")
    if not (isinstance(commit, str) and commit.strip()):
        commit = git.get("sha")
    if isinstance(commit, str) and commit.strip():
        keys.append(("commit:" + commit.strip())[:MAX_KEY])
    patch = git.get("patch")
    if isinstance(patch, str) and patch.strip():
        keys.append("patch:" + hashlib.sha256(patch.encode()).hexdigest()[:40])
    if not keys and status == "baseline":
        keys.append("baseline")
    return keys


def rerun_key(exp_id: str) -> str:
    """The key a declared rerun shares with a trial that had none of its own."""
    return ("rerun:" + exp_id)[:MAX_KEY]


def pooled_sigma(groups: Iterable[Sequence[float]]) -> tuple[float | None, int, int]:
    """``(σ, reruns, groups)``: the pooled standard deviation of the groups of two or
    more values (module doc), the degrees of freedom it rests on and how many groups;
    ``(None, 0, 0)`` without a group of two."""
    squares: list[float] = []
    reruns = used = 0
    for values in groups:
        if len(values) < 2:
            continue
        mean = math.fsum(values) / len(values)
        squares.extend((x - mean) ** 2 for x in values)
        reruns += len(values) - 1
        used += 1
    if not reruns:
        return None, 0, 0
    return math.sqrt(math.fsum(squares) / reruns), reruns, used


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """A project's noise floor: σ (None: unknown), where it comes from (``reruns``,
    ``setting`` or ``none``), the reruns and groups estimated from, and k."""

    sigma: float | None
    source: str
    reruns: int
    groups: int
    k: float = DEFAULT_K
    #: the setting ``auto_keep_above_noise``: status "auto" keeps only above k·σ
    auto_above_noise: bool = False

    @property
    def threshold(self) -> float | None:
        """k·σ: the smallest |Δ| above noise (None without σ)."""
        return None if self.sigma is None else self.k * self.sigma

    def describe(self) -> str:
        """``σ 0.0011 from 5 reruns``, ``σ 0.0011 (set by hand)`` or ``no reruns yet``."""
        if self.sigma is None:
            return "no reruns yet"
        shown = _fixed(self.sigma, _decimals(self.sigma))
        if self.source == "setting":
            return f"σ {shown} (set by hand)"
        return f"σ {shown} from {self.reruns} rerun{'s' if self.reruns != 1 else ''}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "sigma": self.sigma,
            "source": self.source,
            "reruns": self.reruns,
            "groups": self.groups,
            "k": self.k,
            "threshold": self.threshold,
            "auto_keep_above_noise": self.auto_above_noise,
            "text": self.describe(),
        }


def floor_of(settings: Mapping[str, Any] | None, groups: Iterable[Sequence[float]]) -> NoiseFloor:
    """The noise floor of a project with ``settings`` whose repeats hold ``groups`` of metrics."""
    settings = settings or {}
    sigma, reruns, used = pooled_sigma(groups)
    k = check_k(settings[K_SETTING]) if settings.get(K_SETTING) is not None else DEFAULT_K
    auto = bool(settings.get(AUTO_SETTING))
    if settings.get(SIGMA_SETTING) is not None:
        return NoiseFloor(check_sigma(settings[SIGMA_SETTING]), "setting", reruns, used, k, auto)
    return NoiseFloor(sigma, "reruns" if sigma is not None else "none", reruns, used, k, auto)


@dataclass(frozen=True, slots=True)
class NoiseVerdict:
    """What a delta is against the noise floor: ``within`` (None: no σ or no delta) and
    the sentence every face shows."""

    floor: NoiseFloor
    delta: float | None
    within: bool | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.floor.to_dict(), "delta": self.delta, "within_noise": self.within, "text": self.text}


def judge(
    floor: NoiseFloor,
    delta: float | None,
    *,
    status: str = "",
    exp_id: str = "",
    best_metric: float | None = None,
) -> NoiseVerdict:
    """The verdict on ``delta`` (a trial's ``delta_vs_best``): "within noise: +0.0004
    against σ 0.0011 from 5 reruns", "above noise: ...", or, with no σ, that there are no
    reruns yet; a keep within noise, or (with no σ) a marginal one (below
    :data:`MARGINAL_FRACTION` of the best), gets a suggestion to rerun ``exp_id``."""
    rerun = f'; rerun it (rerun_of: "{exp_id}") before building on it' if exp_id else "; rerun it before building on it"
    if delta is None:
        if floor.sigma is None:
            return NoiseVerdict(floor, None, None, "no noise floor: no reruns yet")
        return NoiseVerdict(floor, None, None, f"noise floor: {floor.describe()}")
    if floor.sigma is None:
        text = "no noise floor: no reruns yet to tell this delta from noise"
        scale = abs(best_metric) if best_metric is not None else 0.0
        if status == "keep" and scale and abs(delta) < MARGINAL_FRACTION * scale:
            text += f"; a marginal keep ({_fixed(delta, _decimals(delta), signed=True)})" + rerun
        return NoiseVerdict(floor, delta, None, text)
    within = abs(delta) < floor.k * floor.sigma
    shown = _fixed(delta, _decimals(floor.sigma), signed=True)
    text = f"{'within' if within else 'above'} noise: {shown} against {floor.describe()}"
    if floor.k != DEFAULT_K:
        text += f" (k {floor.k:g})"
    if within and status == "keep":
        text += rerun
    return NoiseVerdict(floor, delta, within, text)


def _decimals(value: float) -> int:
    """Decimals that show two significant digits of ``value``."""
    if value == 0 or not math.isfinite(value):
        return 4
    return max(0, min(12, 1 - math.floor(math.log10(abs(value)))))


def _fixed(value: float, decimals: int, *, signed: bool = False) -> str:
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    if float(text) == 0:  # no "-0.0000"
        text = ("+" if signed else "") + text.lstrip("+-")
    return text
