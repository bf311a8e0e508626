"""Adapters that put trainer_hooks into other trainers' own extension points.

``verl``  :func:`trainer_hooks.integrations.verl.register` adds our losses and estimators to
          verl's policy-loss and advantage-estimator registries under ``ledger_*`` names.

Each submodule imports its trainer only when asked to register; importing it needs torch.
"""
