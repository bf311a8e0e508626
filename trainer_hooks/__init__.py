"""Code that runs inside a training job: losses, advantages, telemetry client, callbacks,
and a wandb-compatible front (``trainer_hooks.wandb``) for scripts written for wandb.

Nothing here imports SQLAlchemy or ``api``; the ledger is reached only over HTTP with
plain JSON. torch is imported by the loss modules alone, so the telemetry client works
in an environment without torch (the server's).
"""
