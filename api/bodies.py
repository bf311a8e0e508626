"""What the handlers read: request bodies parsed and checked before they reach the ledger.

The telemetry batch (the point list through pydantic-core, the columnar form a column at
a time) and an uploaded results file (its text by the files' one rule, the import query's
options; the file spooled as it streams in, never held whole). Each error is the ledger's :class:`~lineage.errors.InvalidInput` or FastAPI's
validation error, so the answer is a 422 problem naming the field. The responses are
``api.present``'s.
"""

from __future__ import annotations

import io
import json
import tempfile
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any

from fastapi import Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api import schemas
from api.present import telemetry_accepted
from lineage.errors import InvalidInput
from lineage.formats.autoresearch import ImportOptions
from lineage.formats.text import check_stream
from lineage.service import Ledger

if TYPE_CHECKING:  # imported where used: telemetry stays off the startup path
    from lineage.telemetry_columns import PointColumns

# -- telemetry --------------------------------------------------------------------------------


def ingest_telemetry(ledger: Ledger, slug: str, exp_id: str, body: bytes, key: str | None) -> JSONResponse:
    """Validate a batch from its JSON bytes (pydantic-core, no model per point) and store it."""
    from pydantic import ValidationError

    from lineage import telemetry

    columnar = _columnar_batch(body) if b'"columns"' in body else None
    if columnar is not None:
        columns, batch_id = columnar
        return telemetry_accepted(ledger.telemetry.ingest_telemetry(slug, exp_id, columns, key=batch_id or key))
    try:
        batch = schemas.TELEMETRY_BATCH.validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    rows = telemetry.rows_from_valid(batch["points"])
    return telemetry_accepted(ledger.telemetry.ingest_telemetry(slug, exp_id, rows, key=batch.get("batch_id") or key))


def _columnar_batch(body: bytes) -> tuple[PointColumns, str | None] | None:
    """``(columns, batch_id)`` of a batch in the columnar form (``lineage.telemetry_columns``),
    checked a column at a time; None when the body is not one (the point list's path
    answers it, parse errors included)."""
    from lineage import telemetry

    try:
        found = _loads(body)
    except ValueError:
        return None
    if not isinstance(found, dict) or "columns" not in found:
        return None
    for key in found:
        if key not in ("batch_id", "columns"):
            raise InvalidInput(
                key,
                "is not a member of a columnar batch (batch_id, columns)"
                + ("; send points or columns, not both" if key == "points" else ""),
            )
    batch_id = found.get("batch_id")
    if batch_id is not None and not isinstance(batch_id, str):
        raise InvalidInput("batch_id", f"must be a string or null, got {batch_id!r}")
    return telemetry.check_columns(found["columns"]), batch_id


def _loads(body: bytes) -> Any:
    """JSON from bytes: orjson (about 3x the standard library on number arrays); the
    standard library for what orjson refuses but Python's JSON reads (``NaN``), so such a
    value is named by the batch's checks rather than refused as unreadable."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


# -- files ------------------------------------------------------------------------------------


#: Bytes of an uploaded results file held in memory before its spool moves to disk.
SPOOL_MEMORY = 1 << 20


async def spool_body(request: Request) -> UploadFile:
    """The request body in a temporary file, written as it streams in (memory up to
    :data:`SPOOL_MEMORY`, then disk): a results file is never held whole as bytes, nor
    as text. The body guard's cap (``LINEAGE_MAX_BODY_BYTES``) applies as it comes."""
    spooled: Any = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # a BinaryIO in all but its stub
    spool = UploadFile(spooled, filename="request body")
    try:
        async for chunk in request.stream():
            await spool.write(chunk)
    except BaseException:
        await spool.close()
        raise
    return spool


def _body_text(body: IO[bytes]) -> io.TextIOWrapper:
    """The spooled body as text, by the files' one rule (:func:`~lineage.formats.text.
    check_stream`: a byte-order mark stays, for a byte-for-byte export); not UTF-8 or
    holding NUL: 422 naming ``body``, the line and the column; empty: 422 too."""
    body.seek(0)
    check_stream(body, source="request body", field="body")  # type: ignore[arg-type]
    body.seek(0)
    text = io.TextIOWrapper(body, encoding="utf-8", newline="")
    while chunk := text.read(1 << 16):
        if chunk.strip():
            text.seek(0)
            return text
    text.detach()
    raise InvalidInput("body", "is empty; send the results file as the request body", line=1, column=1)


def import_options(args: schemas.ImportQuery) -> ImportOptions:
    """The query's options as the core reads every face's (``ImportOptions.from_text``);
    ``direction`` and the older ``lower_is_better`` must agree."""
    options = ImportOptions.from_text(
        id_column=args.id,
        metric=args.metric,
        status=args.status,
        description=args.description,
        parent=args.parent,
        direction=args.direction,
        status_map=args.status_map,
        columns=args.columns,
    )
    if args.lower_is_better is not None:
        if options.lower_is_better is not None and options.lower_is_better != args.lower_is_better:
            raise InvalidInput(
                "direction",
                f"direction={args.direction} contradicts lower_is_better={str(args.lower_is_better).lower()}",
            )
        options = replace(options, lower_is_better=args.lower_is_better)
    return options


def import_tsv(ledger: Ledger, slug: str, body: IO[bytes], args: schemas.ImportQuery) -> JSONResponse:
    """Import the spooled ``body`` (:func:`spool_body`) atomically through the one entrance
    (``Ledger.import_file``), read as a stream: 201 with what was stored and decided; a
    preview: 200, nothing stored."""
    options = import_options(args)
    text = _body_text(body)
    try:
        report = ledger.files.import_file(
            slug,
            text,
            fmt=args.format,
            source="request body",
            create_with={} if args.create else None,
            options=options,
            best_policy=args.best_policy,
            preview=args.preview,
        )
    finally:
        text.detach()  # the route closes the spool
    return JSONResponse(report.to_dict(), status_code=201 if report.committed else 200)
