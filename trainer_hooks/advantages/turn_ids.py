"""The turn-id checks of A²TGPO's token layout (:mod:`trainer_hooks.advantages.a2tgpo`):
ids that would silently give tokens no advantage are refused with a message that names
the token and the rule."""

from __future__ import annotations

from torch import Tensor

__all__ = ["check_turn_ids"]


def check_turn_ids(turn_ids: Tensor, n_ig: Tensor, response_mask: Tensor | None = None) -> None:
    """Refuse turn ids that would silently zero advantages (A²TGPO's layout, module doc).

    Args:
        turn_ids: ``[B, L] int``. n_ig: ``[B]``, each trajectory's IG-turn count ``n_b``.
        response_mask: optional ``[B, L]``; only its shape is checked.

    Raises:
        ValueError: shapes disagree (naming both); an id below ``-1`` or past the row's
            outcome turn ``n_b`` (ids are 0-based: 1-based ids are the usual mistake); a row
            with turn tokens (or IG turns) of which none carries the outcome id ``n_b``.
            Rows with no turn token and no IG turn (padding rows) are fine.
    """
    if response_mask is not None and response_mask.shape != turn_ids.shape:
        raise ValueError(
            f"response_mask {tuple(response_mask.shape)} and turn_ids {tuple(turn_ids.shape)} must have the same "
            "[B, L] shape"
        )
    if turn_ids.numel() == 0:
        return
    ids = turn_ids.long()
    past = ids - n_ig.unsqueeze(1)  # 0 on the outcome turn's tokens
    below = ids < -1
    beyond = past > 0
    has_outcome = (past == 0).any(-1)
    needs_outcome = (ids >= 0).any(-1) | (n_ig > 0)
    missing = needs_outcome & ~has_outcome
    if not bool(below.any() | beyond.any() | missing.any()):  # one sync on the good path
        return
    rule = "turn ids are 0-based: IG turns 0 .. n_b - 1, the outcome turn n_b, -1 on tokens of no turn"
    if below.any():
        row, col = (int(i) for i in below.nonzero()[0])
        raise ValueError(f"turn_ids[{row}, {col}] = {int(ids[row, col])} is below -1 ({rule})")
    if beyond.any():
        row, col = (int(i) for i in beyond.nonzero()[0])
        raise ValueError(
            f"turn_ids[{row}, {col}] = {int(ids[row, col])} is past row {row}'s outcome turn "
            f"n_b = {int(n_ig[row])} ({rule}; 1-based ids give this)"
        )
    row = int(missing.nonzero()[0, 0])
    raise ValueError(
        f"row {row}: no token carries its outcome turn id n_b = {int(n_ig[row])} (its final answer would get no "
        f"advantage; {rule})"
    )
