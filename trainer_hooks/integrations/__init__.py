"""Adapters that put trainer_hooks into other trainers' own extension points.

``verl``        :mod:`trainer_hooks.integrations.verl` adds our losses and estimators to
                verl's policy-loss and advantage-estimator registries under ``ledger_*``
                names when imported (``VERL_USE_EXTERNAL_MODULES`` or the ``verl.plugins``
                entry point bring it into every verl process, Ray workers included);
``verl.actor``  the actor extension that carries A²TGPO's clip scale to ``ledger_a2tgpo``.

Importing them needs torch; verl is imported only when it is installed.
"""
