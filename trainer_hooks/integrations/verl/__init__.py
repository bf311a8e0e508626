"""Drop-in adapters: our policy losses and advantage estimators in verl's own registries.

:func:`register` adds them to ``verl.trainer.ppo.core_algos``'s registries under names of
our own (``ledger_*``; a name verl already holds with another function is an error, so
verl's own entries are never replaced), after which verl selects them like its own.
Importing this module registers them (when verl is installed), so every process of a
verl job gets them, Ray workers included, in either of two ways:

* ``VERL_USE_EXTERNAL_MODULES=trainer_hooks.integrations.verl`` in the job's environment
  (Ray passes it to its workers): verl imports the modules it names in every process that
  imports verl, the actor worker among them, where the policy loss is looked up
  (``verl/workers/utils/losses.py``);
* the package's ``verl.plugins`` entry point, which verl loads the same way unless
  ``VERL_USE_EXTERNAL_PLUGINS`` says otherwise (an installed package, nothing to set).

``register()`` called from ``main_ppo`` reaches only the driver. Options for the workers:
``LEDGER_VERL_OPTIONS``, a JSON object of :func:`register`'s ``options``::

    VERL_USE_EXTERNAL_MODULES=trainer_hooks.integrations.verl \
    LEDGER_VERL_OPTIONS='{"ledger_a3po": {"staleness": 2}}' python -m verl.trainer.main_ppo \
        actor_rollout_ref.actor.policy_loss.loss_mode=ledger_gspo_token algorithm.adv_estimator=ledger_grpo

verl calls a policy loss as ``fn(old_log_prob, log_prob, advantages, response_mask,
loss_agg_mode, config=ActorConfig, rollout_is_weights=None)`` and an estimator as
``fn(token_level_rewards=[B, L], response_mask=[B, L], config=AlgoConfig, index=uids)``
(``index`` a numpy array of uid strings, the GRPO group of each row) expecting
``(advantages, returns)``, both ``[B, L]``. The adapters here have exactly those
signatures; from the actor config they read verl's fields ``clip_ratio``,
``clip_ratio_low``, ``clip_ratio_high``, ``clip_ratio_c`` and ``global_batch_info`` (which
verl's actor fills with ``dp_size``, ``batch_num_tokens``, ``global_batch_size``,
``loss_scale_factor``), and return verl's metrics as floats under verl's names —
``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/pg_clipfrac_lower`` — plus ours under
``actor/ledger/<key>``. Knobs verl's config has no field for are :func:`register`'s
``options`` (per name).

Policy losses
    ``ledger_ppo``           :func:`~trainer_hooks.losses.ppo.ppo_policy_loss` (equals verl's
                             ``vanilla``).
    ``ledger_a2tgpo``        A²TGPO's adaptive-clip loss. It needs the per-token clip scale
                             from ``ledger_a2tgpo``'s advantages, which verl's stock actor
                             does not pass to a policy loss: the actor extension
                             :mod:`trainer_hooks.integrations.verl.actor` carries it (use
                             ``VERL_USE_EXTERNAL_MODULES=trainer_hooks.integrations.verl.actor``),
                             or call it with ``clip_scale=`` / ``turn_ids=`` yourself;
                             without a clip scale it raises instead of silently being PPO.
    ``ledger_gspo_token``    :func:`~trainer_hooks.losses.gspo.gspo_token_policy_loss` (the
                             paper's GSPO-token, honouring ``loss_agg_mode``).
    ``ledger_gspo_smallgain`` GSPO-token with the SmallGain–KL allocator's per-position
                             shaping (:mod:`trainer_hooks.allocator`); one allocator per
                             process, stepped once per loss call (micro-batch), its cost
                             measured against ``old_log_prob``.
    ``ledger_a3po``          A-3PO's decoupled loss with a constant staleness (option
                             ``staleness``, default 1 = verl's synchronous PPO): verl's
                             batch carries no per-token policy versions.
    ``ledger_astar_po``      A*-PO's weighted NLL; its KL term is verl's own
                             (``actor.use_kl_loss``), so ``kl_coef`` is 0 here.

Advantage estimators
    ``ledger_grpo``          GRPO (:func:`~trainer_hooks.advantages.retrain.grpo_advantages`,
                             verl's semantics, one-completion groups included), vectorised;
                             ``norm_adv_by_std_in_grpo`` from the config (default True).
    ``ledger_retrain``       retrain's pipeline (:func:`~trainer_hooks.advantages.retrain.
                             compose_advantages`, options = its config); tokens of skipped
                             (uniform) groups get advantage 0, since verl's batch has no
                             loss-mask channel. GTPO stages use ``old_log_probs`` when
                             verl passes them.
    ``ledger_astar_po``      A*-PO's ``r - V*`` (V* smoothed over the row's group).
    ``ledger_a2tgpo``        A²TGPO / IGPO advantages under verl's multi-turn layout: a
                             turn is a run of ``response_mask`` tokens (tool output is
                             masked out), each turn's information gain is the
                             ``token_level_rewards`` entry on its last token, and the last
                             turn's is the outcome reward. Its second output (verl's
                             ``returns``, which a critic-free estimator leaves unused) is
                             the clip scale, for the actor extension: do not pair it with
                             a critic.

The adapters live in :mod:`.losses` and :mod:`.estimators`; nothing but :func:`register`
(run at import when verl is installed) imports verl.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

from trainer_hooks.integrations.verl.estimators import (
    a2tgpo_advantage,
    astar_po_advantage,
    grpo_outcome_advantage,
    retrain_advantage,
    turns_of,
)
from trainer_hooks.integrations.verl.losses import (
    a2tgpo_loss,
    a3po_loss,
    astar_po_loss_verl,
    gspo_smallgain_loss,
    gspo_token_loss,
    ppo_loss,
)
from trainer_hooks.integrations.verl.settings import ALLOCATORS, OPTIONS, SETTINGS, verl_metrics

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "OPTIONS_ENV",
    "POLICY_LOSSES",
    "a2tgpo_advantage",
    "a2tgpo_loss",
    "grpo_outcome_advantage",
    "options_from_env",
    "ppo_loss",
    "register",
    "turns_of",
    "verl_compat",
    "verl_metrics",
]

#: the environment variable holding :func:`register`'s options for the workers (JSON)
OPTIONS_ENV = "LEDGER_VERL_OPTIONS"

#: verl name -> adapter
POLICY_LOSSES: dict[str, Callable[..., tuple[Tensor, dict[str, float]]]] = {
    "ledger_ppo": ppo_loss,
    "ledger_a2tgpo": a2tgpo_loss,
    "ledger_gspo_token": gspo_token_loss,
    "ledger_gspo_smallgain": gspo_smallgain_loss,
    "ledger_a3po": a3po_loss,
    "ledger_astar_po": astar_po_loss_verl,
}
ADVANTAGE_ESTIMATORS: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {
    "ledger_grpo": grpo_outcome_advantage,
    "ledger_retrain": retrain_advantage,
    "ledger_astar_po": astar_po_advantage,
    "ledger_a2tgpo": a2tgpo_advantage,
}


def verl_compat(version: str) -> str:
    """The ``compat`` preset of a verl version string: ``"verl"`` before 0.9 (b178a3cd is
    0.8.0.dev), ``"verl-0.9.1"`` from 0.9 on (an unparsable version counts as new)."""
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return "verl-0.9.1"
    return "verl" if (major, minor) < (0, 9) else "verl-0.9.1"


def register(options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, list[str]]:
    """Add every adapter to verl's registries; returns the names added, per registry
    (``{"policy_losses": [...], "advantage_estimators": [...]}``).

    Args:
        options: per name, the knobs verl's config has no field for, e.g.
            ``{"ledger_a3po": {"staleness": 2}, "ledger_retrain": {"transform_mode": "none"}}``
            (estimator options of the names that are both: ``ledger_astar_po_advantage``,
            ``ledger_a2tgpo_advantage``). Calling again replaces them.

    Raises:
        ImportError: verl is not installed.
        ValueError: verl already holds one of the names with another function, or an
            option names nothing registered here.
    """
    import verl
    from verl.trainer.ppo import core_algos

    known = set(POLICY_LOSSES) | set(ADVANTAGE_ESTIMATORS) | {"ledger_astar_po_advantage", "ledger_a2tgpo_advantage"}
    unknown = sorted(set(options or {}) - known)
    if unknown:
        raise ValueError(f"register: options for unknown name(s) {unknown}; known: {sorted(known)}")
    for table, existing in (
        (POLICY_LOSSES, core_algos.POLICY_LOSS_REGISTRY),
        (ADVANTAGE_ESTIMATORS, core_algos.ADV_ESTIMATOR_REGISTRY),
    ):
        clash = [name for name, fn in table.items() if name in existing and existing[name] is not fn]
        if clash:
            raise ValueError(f"register: verl already has {clash} with another function; not replacing them")
    OPTIONS.clear()
    OPTIONS.update({name: dict(values) for name, values in (options or {}).items()})
    ALLOCATORS.clear()
    SETTINGS["compat"] = verl_compat(getattr(verl, "__version__", ""))
    for name, fn in POLICY_LOSSES.items():
        core_algos.register_policy_loss(name)(fn)
    for name, estimator in ADVANTAGE_ESTIMATORS.items():
        core_algos.register_adv_est(name)(estimator)
    return {"policy_losses": list(POLICY_LOSSES), "advantage_estimators": list(ADVANTAGE_ESTIMATORS)}


def options_from_env() -> dict[str, dict[str, Any]] | None:
    """:func:`register`'s ``options`` from ``$LEDGER_VERL_OPTIONS`` (a JSON object of
    objects); None when it is unset. A malformed value is a ValueError naming it."""
    raw = os.environ.get(OPTIONS_ENV, "").strip()
    if not raw:
        return None
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{OPTIONS_ENV} must be a JSON object of per-name options: {exc}") from None
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise ValueError(f'{OPTIONS_ENV} must be a JSON object of objects, e.g. {{"ledger_a3po": {{"staleness": 2}}}}')
    return found


# Registered at import (module doc): that is what reaches verl's Ray workers. Without verl
# there is nothing to register into; register() then says so when called.
if importlib.util.find_spec("verl") is not None:
    try:
        register(options_from_env())
    except ImportError as exc:  # a verl that does not import here: the adapters stay usable by hand
        logging.getLogger("trainer_hooks.integrations").warning(
            "ledger: verl is installed but %s; nothing registered", exc
        )
