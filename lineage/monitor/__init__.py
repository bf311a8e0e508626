"""Is the loop healthy? Rules evaluated inside every write and read by agents.

- :mod:`lineage.monitor.progress` — the progress summary (keep rate, best, trend);
- :mod:`lineage.monitor.guardrails` — limits a project sets and their trips;
- :mod:`lineage.monitor.hooks` — webhook subscriptions and the events written to the outbox;
- :mod:`lineage.monitor.delivery` — delivering the outbox, signed, with retries.
"""
