"""Entropy and KL of categorical distributions given as log-probabilities, with ``0 log 0 = 0``.

A token the distribution cannot emit (a ``-inf`` logit: a masked vocabulary entry, top-k /
top-p filtering) has probability 0 and log-probability ``-inf``; written as
``p * log p`` it is ``0 * -inf = NaN`` and one such token makes the whole row NaN. Here
such terms are 0, as ``torch.special.entr`` / ``xlogy`` define them, and the gradients
stay finite: the log-probability is replaced by 0 *before* the product wherever ``p == 0``
(a ``where`` after the product would still send ``0 * -inf`` into the backward pass).

Shapes: ``log_probs: [..., V]`` (normalised over the last dimension) -> ``[...]``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["categorical_entropy", "categorical_kl"]


def categorical_entropy(log_probs: Tensor) -> Tensor:
    """``H = -sum_v p_v log p_v`` over the last dimension, 0-probability entries adding 0."""
    p = log_probs.exp()
    finite = torch.where(p > 0, log_probs, torch.zeros_like(log_probs))
    return -(p * finite).sum(-1)


def categorical_kl(log_p: Tensor, log_q: Tensor) -> Tensor:
    """``KL(p || q) = sum_v p_v (log p_v - log q_v)``; entries with ``p_v = 0`` add 0 (and
    ``p_v > 0, q_v = 0`` adds ``+inf``, the true value)."""
    p = log_p.exp()
    live = p > 0
    diff = torch.where(live, log_p, torch.zeros_like(log_p)) - torch.where(live, log_q, torch.zeros_like(log_q))
    return (p * diff).sum(-1)
