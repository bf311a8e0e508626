"""The git patch a trial carries (``extra._git.patch``, up to 64 KB a trial, stored by
``lineage.loops.git``): the one rule of where it shows. Every face's default answer about
a trial leaves it out (:func:`without_patch`), the diffstat and the rest of ``_git`` kept;
it comes back only when asked for by name (``fields=extra._git.patch``, ``include_patch``).
The pages show it on a trial's own page. Imports nothing of the ledger."""

from __future__ import annotations

from typing import Any

__all__ = ["PATCH_FIELD", "without_patch"]

#: the name that asks for a trial's patch (``fields``)
PATCH_FIELD = "extra._git.patch"


def without_patch(trial: dict[str, Any]) -> dict[str, Any]:
    """``trial`` (a trial as JSON) without ``extra._git.patch``; the same object when it
    holds none, else a copy (the caller's dict is left as it is)."""
    extra = trial.get("extra")
    git = extra.get("_git") if isinstance(extra, dict) else None
    if not isinstance(git, dict) or "patch" not in git:
        return trial
    kept = {key: value for key, value in git.items() if key != "patch"}
    return {**trial, "extra": {**extra, "_git": kept}}  # type: ignore[dict-item]
