"""The trials table: filters (the filter expression of ``lineage.filter_language`` too),
any sort (a trial field or ``extra.KEY``), and pages (``after=`` cursor) of a project's trials,
and the same view as a fieldkit TSV download (``format=tsv``). Its columns follow the
project (:mod:`lineage.browse.columns`); ``?cols=KEY,KEY`` picks them (a form of
checkboxes without script, applied on change with it)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from api.pages.access import Viewer
from api.pages.route import PageRoute, Reader, ledger_of, pages, q_float, q_int, q_str
from api.pages.web import finish, project_url, with_query
from lineage.browse.columns import Column
from lineage.domain import FailureLabel
from lineage.errors import InvalidInput
from lineage.service import TrialsPage, decode_cursor, encode_cursor
from lineage.service.tables import check_sort

router = APIRouter(route_class=PageRoute, include_in_schema=False)

#: Column kind -> the sort that orders by it; other columns sort by their field or extra key.
_SORT_OF_KIND = {"exp": "exp_id", "metric": "metric", "when": "seq"}


def sort_of(column: Column) -> str | None:
    """The ``?sort=`` that orders the table by ``column`` (None: not sortable)."""
    if column.kind in _SORT_OF_KIND:
        return _SORT_OF_KIND[column.kind]
    if column.kind == "long":
        return None
    return column.key if column.source == "extra" else column.name


def offered_statuses(present: Sequence[str], chosen: Sequence[str] | None) -> list[str]:
    """The statuses a status filter offers: those the project's trials have (the loop's
    own words), and any the address chose that none has (so a choice stays visible)."""
    out = list(present)
    for status in chosen or ():
        label = FailureLabel.parse(status).value
        if label not in out:
            out.append(label)
    return out


def cols_param(columns: Sequence[Column]) -> str:
    """The ``?cols=`` value that shows ``columns``: their keys, comma-separated."""
    return ",".join(c.key for c in columns)


def _filters(request: Request) -> dict[str, Any]:
    statuses = [s.strip() for raw in request.query_params.getlist("status") for s in raw.split(",") if s.strip()]
    for status in statuses:
        FailureLabel.parse(status)
    metric_min, metric_max = q_float(request, "min"), q_float(request, "max")
    return {
        "status": statuses or None,
        "specialist": q_str(request, "specialist"),
        "domain": q_str(request, "domain"),
        "parent": q_str(request, "parent"),
        "metric_min": metric_min,
        "metric_max": metric_max,
        "text_query": q_str(request, "q"),
        "expression": q_str(request, "filter"),
    }


def _filter_params(filters: dict[str, Any]) -> dict[str, Any]:
    """The query parameters that reproduce ``filters``."""
    return {
        "status": filters["status"] or None,
        "specialist": filters["specialist"],
        "domain": filters["domain"],
        "parent": filters["parent"],
        "min": filters["metric_min"],
        "max": filters["metric_max"],
        "q": filters["text_query"],
        "filter": filters["expression"],
    }


def _download(request: Request, slug: str, fmt: str, filters: dict[str, Any]) -> Response:
    """The view as a file (``?format=csv|parquet|results|...``, ``tsv``: fieldkit's, with
    ``columns=extended`` the extended one): the bytes ``lineage export --format F
    --filter ...`` writes (``ledger.exports``, one function for both)."""
    if fmt == "tsv":
        fmt = "extended" if q_str(request, "columns") == "extended" else "fieldkit"
    try:
        # the project, the format and the filters are checked here: a bad one is a
        # problem page, never a broken download
        exported = ledger_of(request).exports.export(slug, fmt, name=f"{slug}-trials", **filters)
        chunks = iter(exported.chunks)
        first = next(chunks, b"")
    except ImportError:
        raise InvalidInput("format", "parquet needs pyarrow on the server (the 'parquet' extra)") from None
    return StreamingResponse(
        itertools.chain((first,), chunks),
        media_type=exported.media_type,
        headers={"Content-Disposition": f'attachment; filename="{exported.filename}"'},
    )


def export_links(ledger: Any, slug: str, base: str, view: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, url)`` of the downloads of a view: CSV, Parquet and the project's own
    results file (what ``lineage export --format results`` writes)."""
    own = ledger.exports.resolved_format(slug, "results")
    query = {**view, "limit": None, "sort": None, "order": None, "cols": None, "after": None}
    return [
        ("CSV", with_query(base, {**query, "format": "csv"})),
        ("Parquet", with_query(base, {**query, "format": "parquet"})),
        (_OWN_LABEL.get(own, own), with_query(base, {**query, "format": "results"})),
    ]


_OWN_LABEL = {
    "autoresearch": "results.tsv (the loop's own)",
    "generic": "results.csv (the loop's own)",
    "fieldkit": "results.tsv (fieldkit)",
}


@router.get("/projects/{slug}/trials", response_class=HTMLResponse)
def trials_table(request: Request, slug: str, viewer: Viewer = Reader) -> Response:
    ledger = ledger_of(request)
    filters = _filters(request)
    sort = q_str(request, "sort") or "seq"
    said_desc = sort.startswith("-")
    sort, _ = check_sort(sort)  # any trial field or extra.KEY (a 400 naming sort otherwise)
    sort = "metric" if sort == "core_metric" else sort
    order = "desc" if said_desc else q_str(request, "order") or ("desc" if sort == "seq" else "asc")
    if order not in ("asc", "desc"):
        raise InvalidInput("order", f"must be asc or desc, got {order!r}")
    descending = order == "desc"
    fmt = q_str(request, "format")
    if fmt is not None:
        return finish(request, _download(request, slug, fmt, filters))
    limit = q_int(request, "limit", 50, minimum=1, maximum=1000)
    raw_after = q_str(request, "after")
    after = decode_cursor(raw_after, sort=sort, descending=descending, field="after") if raw_after else None
    filter_error: InvalidInput | None = None
    status = 200
    try:
        page = ledger.tables.trials_page(slug, sort=sort, descending=descending, after=after, limit=limit, **filters)  # type: ignore[arg-type]
    except InvalidInput as bad:
        if bad.field != "filter":
            raise
        # the form again with the error under the box (what and where), no rows
        filter_error, status = bad, 422
        page = TrialsPage(project=ledger.projects.project(slug), trials=(), next_after=None, total=None)
    columns = ledger.browse.project_columns(slug)
    asked = request.query_params.getlist("cols")
    shown = columns.pick(asked)
    params = {**_filter_params(filters), "cols": cols_param(shown) if any(a.strip() for a in asked) else None}
    view = {
        **params,
        "sort": sort if sort != "seq" else None,
        "order": order if order != ("desc" if sort == "seq" else "asc") else None,
        "limit": limit if limit != 50 else None,
    }
    base = project_url(slug, "/trials")
    return pages(request).render(
        request,
        "trials.html",
        {
            "project": page.project,
            "page": page,
            "filters": filters,
            "sort": sort,
            "order": order,
            "limit": limit,
            "statuses": offered_statuses(columns.statuses, filters["status"]),
            "next_url": with_query(base, {**view, "after": encode_cursor(sort, descending, page.next_after)})
            if page.next_after
            else None,
            "first_url": with_query(base, view) if after is not None else None,
            "exports": export_links(ledger, slug, base, view),
            "sort_url": lambda key, direction: with_query(
                base, {**params, "sort": key, "order": direction, "limit": view["limit"]}
            ),
            "filtered": any(v not in (None, "", []) for v in filters.values()),
            "columns": columns,
            "sort_of": sort_of,
            "default_cols_url": with_query(base, {**view, "cols": None}),
            "shown": shown,
            "shown_keys": [c.key for c in shown],
            "cols_value": params["cols"] or "",
            "filter_error": filter_error,
            "sort_label": {"seq": "time", "metric": page.project.metric_name, "exp_id": "exp id"}.get(sort, sort),
        },
        status=status,
    )
