"""Logging of the service: request ids in every record, text or JSON lines, no secrets.

:func:`configure_logging` installs one handler on the ``lineage`` logger (records of
``lineage.access``, ``lineage.api`` and the ledger) and, under ``lineage serve``, on
uvicorn's loggers. ``log_format="json"`` writes one JSON object per line with ``ts``,
``level``, ``logger``, ``message``, ``request_id`` and the record's extra fields.

Secrets: the API never logs headers or bodies; query strings are logged with the value
of any parameter whose name contains ``token``, ``secret``, ``password`` or ``key``
replaced by ``***``, and :class:`RedactTokens` masks anything shaped like a ledger token
(``llt_...``) in every record, whatever logged it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

from lineage.auth import TOKEN_PREFIX

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("lineage_request_id", default="-")

_SECRET_PARAM = re.compile(r"token|secret|password|key|authorization", re.IGNORECASE)
_TOKEN_SHAPE = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "request_id"}
_MARK = "_lineage_handler"


def redact_query(query: str) -> str:
    if not query or not _SECRET_PARAM.search(query):
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, "***" if _SECRET_PARAM.search(k) else v) for k, v in pairs])


def redact(text: str) -> str:
    if TOKEN_PREFIX in text:
        text = _TOKEN_SHAPE.sub(TOKEN_PREFIX + "***", text)
    if "earer" in text:
        text = _BEARER.sub(r"\1***", text)
    return text


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


class RedactTokens(logging.Filter):
    """Masks token-shaped text and bearer credentials in the message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", REQUEST_ID.get()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False)


def make_handler(log_format: str, stream: Any = None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactTokens())
    setattr(handler, _MARK, True)
    return handler


def configure_logging(log_format: str = "text", level: str = "info") -> None:
    """Install the service's handler on the ``lineage`` logger (a second call replaces it).
    Records still propagate, so a test's log capture sees them too."""
    logger = logging.getLogger("lineage")
    for old in [h for h in logger.handlers if getattr(h, _MARK, False)]:
        logger.removeHandler(old)
    logger.addHandler(make_handler(log_format))
    logger.setLevel(level.upper())


def uvicorn_log_config(log_format: str = "text", level: str = "info") -> dict[str, Any]:
    """uvicorn's ``log_config`` for ``lineage serve``: its records in the service's format,
    with the redaction filters; its access log off (``lineage.access`` has request ids)."""
    formatter = "api.logs.JsonFormatter" if log_format == "json" else "api.logs.TextFormatter"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "api.logs.RequestIdFilter"}, "redact": {"()": "api.logs.RedactTokens"}},
        "formatters": {"main": {"()": formatter}},
        "handlers": {
            "main": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "main",
                "filters": ["request_id", "redact"],
            },
        },
        "loggers": {
            "uvicorn": {"handlers": ["main"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }
