"""Adapters that connect a training loop to the ledger through :class:`~trainer_hooks.client.LedgerClient`.

* :class:`TrialRecorder` (``recorder``): a context manager for a plain PyTorch loop;
* ``trainer_hooks.callbacks.hf.LedgerCallback``: a ``transformers.TrainerCallback``, also for
  TRL's ``GRPOTrainer``
  (imported on its own, so this package does not need transformers);
* :func:`verl_hook` (``verl``): takes the metrics dict verl produces each step and the
  final validation metrics.
"""

from trainer_hooks.callbacks.recorder import TrialRecorder
from trainer_hooks.callbacks.verl import VerlHook, verl_hook

__all__ = ["TrialRecorder", "VerlHook", "verl_hook"]
