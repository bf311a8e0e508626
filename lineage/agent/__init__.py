"""AGENT: what an agent reads and is told — the session-start prompt, KNOWLEDGE.md,
"was this tried?", the progress summary, guardrails and hooks.

- :mod:`lineage.agent.uses` — ``Agent`` (``ledger.agent``);
- :mod:`lineage.agent.prompt` — the prompt wrapper (sandboxed Jinja2 template);
- :mod:`lineage.agent.render` — KNOWLEDGE.md and the prompt, byte-identical to fieldkit.
"""
