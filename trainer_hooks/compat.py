"""Which upstream a ``compat=`` preset means, and how a function resolves its options.

Every function here that follows an upstream implementation names each point where the
upstreams (or the upstream and our default) differ as one keyword argument, and takes a
``compat=`` preset that sets all of them at once to one upstream's semantics. An argument
given explicitly always wins over the preset; the preset wins over the function's default.
A function that ignores a preset for an option says so in its docstring.

The presets (each pinned to the source it was checked against):

``"verl"``
    volcengine/verl at commit b178a3cd (``verl/trainer/ppo/core_algos.py``), the code the
    project's hidden reference cases were computed from.
``"verl-0.9.1"``
    the verl 0.9.1 release on PyPI (what ``pip install verl==0.9.1`` gives and what the
    differential tests run). It differs from b178a3cd in two places that matter here:
    ``seq-mean-token-sum-norm`` averages over rows, and ``gspo`` honours ``loss_agg_mode``.
``"retrain"``
    retrain 0.3.2 (``retrain/advantages.py``, ``retrain/trainer.py``).
``"areal"``
    AReaL at commit 4aef98d8 (``areal/utils/functional/functional.py``; identical in the
    areal 1.0.4 release on PyPI).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PRESETS", "resolve_options"]

#: compat name -> what it pins (the text of the module docstring, for error messages).
PRESETS: dict[str, str] = {
    "verl": "verl @ b178a3cd",
    "verl-0.9.1": "verl 0.9.1 (PyPI)",
    "retrain": "retrain 0.3.2",
    "areal": "AReaL @ 4aef98d8",
}


def resolve_options(
    function: str,
    compat: str | None,
    presets: Mapping[str, Mapping[str, Any]],
    defaults: Mapping[str, Any],
    given: Mapping[str, Any],
) -> dict[str, Any]:
    """The option values a call runs with: explicit argument > ``compat`` preset > default.

    Args:
        function: the caller's name (for error messages).
        compat: a key of :data:`PRESETS` or None (the function's defaults).
        presets: ``compat -> {option: value}`` of the presets the function supports; a
            supported preset that changes nothing maps to ``{}``.
        defaults: ``{option: value}``, every option.
        given: ``{option: value or None}``; None means "not given".

    Raises:
        ValueError: ``compat`` is unknown, or not supported by ``function``.
    """
    out = dict(defaults)
    if compat is not None:
        if compat not in presets:
            known = ", ".join(repr(name) for name in presets) or "none"
            where = f" ({PRESETS[compat]})" if compat in PRESETS else ""
            raise ValueError(f"{function}: compat={compat!r}{where} is not a preset of this function; known: {known}")
        out.update(presets[compat])
    out.update({name: value for name, value in given.items() if value is not None})
    return out
