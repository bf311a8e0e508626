"""Alembic environment and versions: the only way the ledger's schema changes.

Shipped inside the wheel as ``lineage.migrations``; ``lineage.migrate`` runs it.
"""
