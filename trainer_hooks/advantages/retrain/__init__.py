"""retrain's composable advantage pipeline, vectorized over a padded batch.

Owns the pieces of retrain (github.com/teilomillet/retrain) that turn per-completion
rewards into per-token advantages, and the one function that chains them::

    rewards [B] --advantage_mode--> A_i [B]                         grpo (retrain's) | maxrl | astar_po | dotted path
                --uncertainty_kind--> H(t) [B, L]                   surprisal | predictive_variance | shannon_entropy
                --sepa--> H_pooled(t)   (execution tokens pulled toward their mean, strength lambda;
                                         sepa_amp: pushed away from it, sepa_amp_c: and floored at 0)
                --gtpo--> A_i * w(t),  w(t) = max(0, 1 + beta (H(t)/mean_i(H) - 1))
                --hicra--> A(t) + alpha |A(t)| planning(t)

``compose_advantages`` runs that chain from names in a :class:`RetrainAdvantageConfig`;
estimators and transforms are fetched from :mod:`trainer_hooks.registry` (``"retrain_grpo"``,
``"maxrl"``; ``"gtpo"``, ``"sepa"``, ``"sepa_amp"``, ``"sepa_amp_c"``, ``"hicra"``). It also owns strategic-gram
planning-token detection (on token ids, or on decoded token text) and the SEPA lambda
schedule (:class:`SEPAController`, the only state here).

Batch layout
    ``B`` completions padded to ``L`` tokens. ``group_ids: [B] int`` gives each
    completion its prompt group (any integers, any order). ``response_mask: [B, L] bool``
    is True on generated tokens; every ``[B, L]`` output is exactly 0 / False elsewhere.
    All reductions are scatter/segment ops over the batch; there is no Python loop over
    completions, groups or tokens. bf16/fp16 inputs are computed in float32; float64
    stays float64.

Where sources disagree, the choice made here (each is a keyword you can flip)
    * GRPO: the pipeline's ``advantage_mode="grpo"`` is retrain's (pure mean centring,
      ``A_i = r_i - mean(r)``, "No normalization"; a single completion gets 0), the
      registry's ``"retrain_grpo"``. The registry's ``"grpo"`` is verl's / the DeepSeekMath
      paper's (divided by the unbiased group std ``+1e-6``; a single completion keeps its
      score): :func:`grpo_advantages`, whose ``compat=`` picks either.
    * SEPA schedule: retrain's trainer config (``steps=500, delay_steps=50,
      correct_rate_gate=0.1``), not its controller's constructor defaults (all 0), which
      make ``gtpo_sepa`` silently equal to ``gtpo``.
    * Planning tokens: only the tokens that overlap a matched gram are marked, and a word
      split over sub-word tokens is found. retrain's window scan also marks up to four
      tokens *before* a gram that share its window and cannot match a split word:
      ``planning_mask_from_token_strs(..., window=5)`` (or ``compat="retrain"``) is it.

Modules (every public name is importable from this package)
    ``estimators``  grpo, retrain_grpo, maxrl (episode advantages), the group statistics.
    ``uncertainty`` token uncertainty, GTPO weighting, HICRA amplification, SEPA pooling
                    and amplification.
    ``planning``    strategic grams -> planning-token masks.
    ``sepa``        :class:`SEPAController` (the lambda schedule).
    ``pipeline``    :class:`RetrainAdvantageConfig`, :func:`compose_advantages` (telemetry
                    keys in its module docstring).
"""

from __future__ import annotations

from trainer_hooks.advantages.retrain.estimators import (
    CORRECT_THRESHOLD,
    grpo_advantages,
    grpo_dense,
    maxrl_advantages,
    retrain_grpo_advantages,
    uniform_groups,
)
from trainer_hooks.advantages.retrain.pipeline import (
    RETRAIN_ADVANTAGE_MODES,
    SEPA_STAGES,
    RetrainAdvantageConfig,
    RetrainAdvantages,
    compose_advantages,
    parse_transform_mode,
)
from trainer_hooks.advantages.retrain.planning import (
    DEFAULT_STRATEGIC_GRAMS,
    encode_strategic_grams,
    normalize_gram_text,
    parse_strategic_grams,
    planning_mask_from_token_ids,
    planning_mask_from_token_strs,
)
from trainer_hooks.advantages.retrain.sepa import SEPAController
from trainer_hooks.advantages.retrain.uncertainty import (
    MAX_UNCERTAINTY,
    canonical_uncertainty_kind,
    entropy_from_logits,
    gtpo_weighting,
    hicra_amplify,
    sepa_amplify,
    sepa_amplify_clamped,
    sepa_pool,
    token_uncertainty,
)

__all__ = [
    "CORRECT_THRESHOLD",
    "DEFAULT_STRATEGIC_GRAMS",
    "MAX_UNCERTAINTY",
    "RETRAIN_ADVANTAGE_MODES",
    "SEPA_STAGES",
    "RetrainAdvantageConfig",
    "RetrainAdvantages",
    "SEPAController",
    "canonical_uncertainty_kind",
    "compose_advantages",
    "encode_strategic_grams",
    "entropy_from_logits",
    "grpo_advantages",
    "grpo_dense",
    "gtpo_weighting",
    "hicra_amplify",
    "maxrl_advantages",
    "normalize_gram_text",
    "parse_strategic_grams",
    "parse_transform_mode",
    "planning_mask_from_token_ids",
    "planning_mask_from_token_strs",
    "retrain_grpo_advantages",
    "sepa_amplify",
    "sepa_amplify_clamped",
    "sepa_pool",
    "token_uncertainty",
    "uniform_groups",
]
