"""Advantage estimators and transforms (registered in :mod:`trainer_hooks.registry`).

``a2tgpo``   A²TGPO / IGPO turn-level advantages, information gain, adaptive clip scale.
``segments`` segment (group / turn) reductions shared by the estimators and losses.
``retrain``  retrain's composable advantage pipeline.

Submodules are imported on use (the registry loads the built-in ones lazily), so
importing this package does not import torch.
"""
