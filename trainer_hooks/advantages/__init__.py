"""Advantage estimators and transforms (registered in :mod:`trainer_hooks.registry`).

``a2tgpo``   A²TGPO / IGPO turn-level advantages, information gain, adaptive clip scale.
``retrain``  retrain's composable advantage pipeline.

The segment (group / turn) reductions they share with the losses are in
:mod:`trainer_hooks.ops.segments`.

Submodules are imported on use (the registry loads the built-in ones lazily), so
importing this package does not import torch.
"""
