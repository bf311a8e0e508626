"""retrain's composable advantage pipeline, vectorized over a padded batch.

Owns the pieces of retrain (github.com/teilomillet/retrain) that turn per-completion
rewards into per-token advantages, and the one function that chains them::

    rewards [B] --advantage_mode--> A_i [B]                         grpo | maxrl | astar_po | dotted path
                --uncertainty_kind--> H(t) [B, L]                   surprisal | predictive_variance | shannon_entropy
                --sepa--> H_pooled(t)   (execution tokens pulled toward their mean, strength lambda)
                --gtpo--> A_i * w(t),  w(t) = max(0, 1 + beta (H(t)/mean_i(H) - 1))
                --hicra--> A(t) + alpha |A(t)| planning(t)

``compose_advantages`` runs that chain from names in a :class:`RetrainAdvantageConfig`;
estimators and transforms are fetched from :mod:`trainer_hooks.registry` (``"grpo"``,
``"maxrl"``; ``"gtpo"``, ``"sepa"``, ``"hicra"``). It also owns strategic-gram
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
    * GRPO std normalisation: ``normalize_by_std=False``. retrain's GRPO is pure mean
      centering (``A_i = r_i - mean(r)``, "No normalization"); verl / the DeepSeekMath
      paper divide by the group std (unbiased, ``+1e-6``). Off by default because this
      module implements retrain, and because dividing by a tiny std blows up
      near-uniform groups (the Dr. GRPO objection). When on, the std is the shared
      ``segment_normalize``'s ``sqrt(var + var_eps)`` (``var_eps=1e-8``; 0 is verl-exact).
    * SEPA schedule: retrain's trainer config (``steps=500, delay_steps=50,
      correct_rate_gate=0.1``), not its controller's constructor defaults (all 0), which
      make ``gtpo_sepa`` silently equal to ``gtpo``.
    * Planning tokens: only the tokens that overlap a matched gram are marked. retrain's
      window scan also marks up to four tokens *before* a gram that share its window,
      and cannot match a word split over two sub-word tokens; neither is reproduced.

Modules (every public name is importable from this package)
    ``estimators``  grpo, maxrl (episode advantages), the group reward statistics.
    ``uncertainty`` token uncertainty, GTPO weighting, HICRA amplification, SEPA pooling.
    ``planning``    strategic grams -> planning-token masks.
    ``sepa``        :class:`SEPAController` (the lambda schedule).
    ``pipeline``    :class:`RetrainAdvantageConfig`, :func:`compose_advantages` (telemetry
                    keys in its module docstring).
"""

from __future__ import annotations

from trainer_hooks.advantages.retrain.estimators import CORRECT_THRESHOLD, grpo_advantages, maxrl_advantages
from trainer_hooks.advantages.retrain.pipeline import (
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
    sepa_pool,
    token_uncertainty,
)

__all__ = [
    "CORRECT_THRESHOLD",
    "DEFAULT_STRATEGIC_GRAMS",
    "MAX_UNCERTAINTY",
    "RetrainAdvantageConfig",
    "RetrainAdvantages",
    "SEPAController",
    "canonical_uncertainty_kind",
    "compose_advantages",
    "encode_strategic_grams",
    "entropy_from_logits",
    "grpo_advantages",
    "gtpo_weighting",
    "hicra_amplify",
    "maxrl_advantages",
    "normalize_gram_text",
    "parse_strategic_grams",
    "parse_transform_mode",
    "planning_mask_from_token_ids",
    "planning_mask_from_token_strs",
    "sepa_pool",
    "token_uncertainty",
]
