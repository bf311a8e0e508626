"""Policy losses (registered in :mod:`trainer_hooks.registry`) and their aggregation.

``aggregation`` ``agg_loss`` (verl's modes and global-batch arguments; masked moments are in
                :mod:`trainer_hooks.ops.masked`).
``ppo``         ``"ppo"`` / ``"vanilla"`` and ``"a2tgpo"`` (adaptive turn clipping).
``gspo``        ``"gspo"`` (verl's), ``"gspo_token"`` and ``"gspo_seq"`` (the paper's two).
``a3po``, ``astar_po`` further losses.

Every loss is ``fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, **kw)
-> (loss, telemetry)`` with ``telemetry`` a flat ``dict[str, Tensor]`` of 0-dim tensors.
Submodules are imported on use, so importing this package does not import torch.
"""
