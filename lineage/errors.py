"""The one exception hierarchy of the ledger.

Every face maps these in exactly one place: HTTP to problem+json (`api.problems`),
the CLI to one line on stderr, MCP to a tool error. Each error says *what* went wrong
and *where* (a field name, or a line and column of an input file).
"""

from __future__ import annotations

from typing import Any


class LedgerError(Exception):
    """Base of every error the ledger raises on purpose."""

    #: Short machine-readable kind; also the tail of the problem+json ``type`` URI.
    code = "ledger-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.message}


class NotFound(LedgerError):
    """A project, trial or token that does not exist."""

    code = "not-found"

    def __init__(self, entity: str, key: str, *, field: str | None = None) -> None:
        super().__init__(f"{entity} {key!r} not found")
        self.entity = entity
        self.key = key
        self.field = field

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out.update(entity=self.entity, key=self.key)
        if self.field:
            out["field"] = self.field
        return out


class Conflict(LedgerError):
    """A write that contradicts what is stored (same id, different body)."""

    code = "conflict"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        existing: dict[str, Any] | None = None,
        proposed: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.existing = existing
        self.proposed = proposed

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if self.field:
            out["field"] = self.field
        if self.existing is not None:
            out["existing"] = self.existing
        if self.proposed is not None:
            out["proposed"] = self.proposed
        return out


class InvalidInput(LedgerError):
    """A value that breaks a rule. Names the field, and for files the line and column."""

    code = "invalid-input"

    def __init__(
        self,
        field: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{field}: {message}")
        self.field = field
        self.reason = message
        self.line = line
        self.column = column

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out["field"] = self.field
        if self.line is not None:
            out["line"] = self.line
        if self.column is not None:
            out["column"] = self.column
        return out
