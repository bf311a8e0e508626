"""Exports (``ledger.exports``): a project's trials, or a trials-table view of them, as a
file, the one function both ``lineage export`` and the pages' download links call, so
the two give the same bytes.

Formats (:data:`FORMATS`):

* ``csv`` and ``parquet``: the typed table of :mod:`lineage.formats.table_export`
  (every trial field, ``extra.*`` as columns, UTC times, deltas at 12 significant digits);
* ``results``: the project's own results file: the stored layout of an imported or
  watched file (autoresearch's ``results.tsv`` or a fork, the file's own columns, number
  formats and status words; an imported row comes back as it was written), else
  fieldkit's ``results.tsv``;
* ``autoresearch`` and ``generic``: a results file in the stored layout, else
  autoresearch's own header (``generic``: comma-separated);
* ``fieldkit`` and ``extended``: fieldkit's ``results.tsv`` (``extended``: plus the
  clip-scale columns and ``extra`` as JSON).

A view is the trials-table's filters (``status``, ``expression``, ``text_query``...,
:meth:`Tables.iter_trials_page`); its rows come in the file's order (oldest first), what
a results file and a table for pandas both expect, whatever order the page showed.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.formats import autoresearch as ar
from lineage.loops.importing import layout_of

if TYPE_CHECKING:
    from lineage.service.tables import Tables
    from lineage.store import Store

#: Every export format, as ``lineage export --format`` and ``?format=`` name them.
FORMATS = ("csv", "parquet", "results", "autoresearch", "generic", "fieldkit", "extended")
#: Rows a text export encodes at a time (a project of any size in bounded memory).
BATCH = 2_000
_MEDIA = {
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
    "tsv": "text/tab-separated-values; charset=utf-8",
}


@dataclass(slots=True)
class ExportFile:
    """A file being exported: its ``chunks`` (bytes, produced as they are read), its
    media type and file name; ``count`` is the number of trials once ``chunks`` is spent."""

    chunks: Iterator[bytes]
    media_type: str
    filename: str
    counted: list[int] = field(default_factory=lambda: [0])

    @property
    def count(self) -> int:
        return self.counted[0]


class Exports:
    """export (the project or a view, in any of :data:`FORMATS`), format_of."""

    def __init__(self, store: Store, tables: Tables) -> None:
        self.store = store
        self.tables = tables

    def resolved_format(self, project_slug: str, fmt: str) -> str:
        """``results`` made concrete for this project (``autoresearch``, ``generic`` or
        ``fieldkit``); any other format as given. Unknown: ``InvalidInput`` on ``format``."""
        if fmt not in FORMATS:
            raise InvalidInput("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if fmt != "results":
            return fmt
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
        layout = layout_of(project)
        if layout is None:
            return "fieldkit"
        return ar.GENERIC if layout.is_csv else ar.NAME

    def export(self, project_slug: str, fmt: str, *, name: str | None = None, **filters: Any) -> ExportFile:
        """The file of ``project_slug``'s trials matching ``filters`` (none: every trial)
        in ``fmt``. The project and the filters are checked before the first byte, so a
        bad one is an error, never a broken download. ``parquet`` needs pyarrow
        (``ImportError`` otherwise)."""
        concrete = self.resolved_format(project_slug, fmt)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
        view = {k: v for k, v in filters.items() if v not in (None, "", [], ())}
        if view:  # a bad expression fails here, not half way through a download
            self.tables.trials_page(project_slug, limit=1, count=False, **view)
        rows = self._rows(project_slug, view)
        stem = name or project.slug
        file = ExportFile(iter(()), "", "")
        counted = file.counted

        def counting(trials: Iterable[Trial]) -> Iterator[Trial]:
            table = concrete in ("csv", "parquet")  # a results file has no row for a running trial
            for trial in trials:
                if table or trial.status is not FailureLabel.RUNNING:
                    counted[0] += 1
                    yield trial

        if concrete in ("csv", "parquet"):
            file.chunks = _table(counting(rows), concrete)
            file.media_type, file.filename = _MEDIA[concrete], f"{stem}.{concrete}"
        elif concrete in ("fieldkit", "extended"):
            file.chunks = _fieldkit(counting(rows), extended=concrete == "extended")
            file.media_type = _MEDIA["tsv"]
            file.filename = f"{stem}{'-extended' if concrete == 'extended' else ''}.tsv"
        else:
            layout = layout_of(project)
            if layout is None:
                layout = ar.default_layout(project.metric_name)
                if concrete == ar.GENERIC:
                    layout.delimiter = ","
                    layout.header_text = ",".join(layout.columns) + "\n"
            file.chunks = _results(counting(rows), layout)
            file.media_type = _MEDIA["csv" if layout.is_csv else "tsv"]
            file.filename = f"{stem}.{'csv' if layout.is_csv else 'tsv'}"
        return file

    def _rows(self, project_slug: str, view: dict[str, Any]) -> Iterator[Trial]:
        if not view:
            return self.tables.stream_trials(project_slug)
        return self.tables.iter_trials_page(project_slug, sort="seq", descending=False, **view)


def _table(trials: Iterable[Trial], fmt: str) -> Iterator[bytes]:
    from lineage.formats.table_export import to_frame, write_parquet

    frame = to_frame(trials)
    if fmt == "csv":
        yield frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
        return
    buffer = io.BytesIO()
    write_parquet(frame, buffer)
    yield buffer.getvalue()


def _fieldkit(trials: Iterable[Trial], *, extended: bool) -> Iterator[bytes]:
    from lineage.formats.fieldkit import iter_tsv

    for text in iter_tsv(trials, extended=extended, batch=BATCH):
        yield text.encode("utf-8")


class _Chunks(io.StringIO):
    """A text stream the results writer writes into, drained as UTF-8 bytes."""

    def drain(self) -> bytes:
        text = self.getvalue()
        self.seek(0)
        self.truncate()
        return text.encode("utf-8")


def _results(trials: Iterable[Trial], layout: ar.Layout) -> Iterator[bytes]:
    buffer = _Chunks(newline="")
    writer = ar.Writer(buffer, layout)
    for index, trial in enumerate(trials, 1):
        writer.write(trial)
        if index % BATCH == 0:
            yield buffer.drain()
    writer.close()
    yield buffer.drain()
