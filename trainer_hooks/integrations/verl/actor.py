"""The actor extension that runs ``ledger_a2tgpo`` in verl's stock actor: A²TGPO's clip
scale goes from the advantage step to the loss.

verl's trainer keeps two per-token outputs of an advantage estimator with the batch,
``advantages`` and ``returns``, and its actor's loss (``verl.workers.utils.losses.ppo_loss``)
calls the policy loss with ``(old_log_prob, log_prob, advantages, response_mask,
loss_agg_mode, config, rollout_is_weights)`` only. A²TGPO's loss needs one more per-token
tensor, the adaptive clip scale, so:

1. the ``ledger_a2tgpo`` estimator returns ``(advantages, clip_scale)``: the clip scale
   rides in ``returns``, which a critic-free estimator leaves unused and verl ships to
   the actor with the batch;
2. :func:`carrying_ppo_loss` replaces verl's ``ppo_loss`` in the worker: for loss mode
   ``ledger_a2tgpo`` it reads ``returns`` (1 outside the response mask) and the turns of
   verl's multi-turn layout (runs of ``response_mask`` tokens) from the micro-batch, and
   hands them to the ``ledger_a2tgpo`` loss for that one call; then it runs verl's own
   ``ppo_loss`` unchanged (entropy, KL, metrics, aggregation). Every other loss mode is
   verl's ``ppo_loss`` untouched.

Importing this module registers the adapters (:mod:`trainer_hooks.integrations.verl`) and
installs the extension; so in every process of the job::

    VERL_USE_EXTERNAL_MODULES=trainer_hooks.integrations.verl.actor python -m verl.trainer.main_ppo \\
        algorithm.adv_estimator=ledger_a2tgpo \\
        actor_rollout_ref.actor.policy_loss.loss_mode=ledger_a2tgpo

(verl imports the module while it is being imported, before its workers bind
``ppo_loss``). ``LEDGER_VERL_OPTIONS='{"ledger_a2tgpo": {"ratio_level": "token"}}'`` uses
the token-level ratio instead of A²TGPO's turn-level one. Not covered: the distillation
loss (``distillation_ppo_loss``), and a job with a critic (it would train on the clip
scale as its returns).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from trainer_hooks.integrations.verl import register  # noqa: F401 - importing registers the adapters
from trainer_hooks.integrations.verl.estimators import turns_of
from trainer_hooks.integrations.verl.settings import CARRIED, config_value

__all__ = ["LOSS_MODE", "carried_from_batch", "carrying_ppo_loss", "install"]

LOSS_MODE = "ledger_a2tgpo"
#: verl's own ``ppo_loss``, once :func:`install` replaced it
_ORIGINAL: dict[str, Callable[..., Any]] = {}


def carried_from_batch(data: Any) -> dict[str, Tensor]:
    """What the ``ledger_a2tgpo`` loss needs from a micro-batch (verl's ``TensorDict``):
    ``clip_scale`` (``returns``, 1 outside the response mask) and ``turn_ids`` (runs of
    ``response_mask`` tokens, ``-1`` elsewhere), both ``[B, L]`` padded as ``ppo_loss``
    pads ``advantages``."""
    if "returns" not in data.keys():
        raise ValueError(
            "ledger_a2tgpo: the batch has no 'returns', where the ledger_a2tgpo advantage estimator leaves the clip "
            "scale; set algorithm.adv_estimator=ledger_a2tgpo"
        )
    padded = data.select("returns", "response_mask").to_padded_tensor()
    mask = padded["response_mask"].to(torch.bool)
    returns = padded["returns"]
    scale = torch.where(mask, returns, torch.ones_like(returns))
    return {"clip_scale": scale, "turn_ids": turns_of(mask)[0]}


def carrying_ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> Any:
    """verl's ``ppo_loss(config, model_output, data, dp_group)``; for loss mode
    ``ledger_a2tgpo`` with the clip scale and turn ids of ``data`` carried to the loss
    (module doc)."""
    original = _ORIGINAL["ppo_loss"]
    mode = config_value(config_value(config, "policy_loss"), "loss_mode", "vanilla")
    if mode != LOSS_MODE:
        return original(config, model_output, data, dp_group)
    token = CARRIED.set(carried_from_batch(data))
    try:
        return original(config, model_output, data, dp_group)
    finally:
        CARRIED.reset(token)


def install() -> None:
    """Put :func:`carrying_ppo_loss` where verl's actor worker takes its loss from
    (``verl.workers.utils.losses.ppo_loss``, and ``verl.workers.engine_workers.ppo_loss``
    when that module is imported already). Idempotent.

    Raises:
        ImportError: verl is not installed.
    """
    from verl.workers.utils import losses

    current = losses.ppo_loss
    if current is carrying_ppo_loss:
        return
    _ORIGINAL["ppo_loss"] = current
    losses.ppo_loss = carrying_ppo_loss
    workers = sys.modules.get("verl.workers.engine_workers")
    if workers is not None and getattr(workers, "ppo_loss", None) is current:
        workers.ppo_loss = carrying_ppo_loss  # type: ignore[attr-defined]


install()
