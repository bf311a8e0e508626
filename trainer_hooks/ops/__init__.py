"""Tensor primitives shared by the advantage estimators and the losses.

``segments`` group / turn reductions over a padded batch (statistics, pooling, broadcast,
             reverse discounted sums).
``masked``   ``masked_sum`` / ``masked_mean`` / ``masked_var`` of ``[B, L]`` values under a mask.
``stats``    telemetry reductions (clip-scale moments and bound fractions, masked moments).
``distributions`` entropy and KL of categorical distributions, ``0 log 0 = 0``.

Both families (``trainer_hooks.advantages`` and ``trainer_hooks.losses``) import from here
and never from each other. Submodules are imported on use, so importing this package does
not import torch.
"""
