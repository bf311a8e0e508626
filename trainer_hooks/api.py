"""Reading the ledger back from Python, as ``wandb.Api`` or trackio's ``Api`` do: projects,
trials (dicts, or a pandas DataFrame), telemetry series, the best trial, a trial's chain,
and a knob's history. Over the ledger's HTTP API only (httpx; no server code), so it runs
in a training job or a notebook::

    from trainer_hooks.api import Api

    api = Api("http://127.0.0.1:8000", token=None)      # or $LINEAGE_URL / $LINEAGE_TOKEN
    api.projects()                                      # [{"slug": ..., "metric_name": ...}, ...]
    runs = api.trials("my-project", filter="status = keep and extra.lr < 1e-3")
    df = api.trials_frame("my-project")                 # pandas (optional): one row per trial
    api.telemetry("my-project", "007", names=["loss"])  # {"loss": {"step": [...], "value": [...]}}
    api.best("my-project"), api.chain("my-project", "007"), api.knob_history("my-project", "lr")

Errors: a ledger that refuses (4xx) raises :class:`ApiError` with its status and the
problem's ``detail`` (and ``field``); an unreachable one, httpx's error. A read never
writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["Api", "ApiError"]

API = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:8000"
#: trials per page asked for (the ledger's most)
PAGE = 1000


class ApiError(Exception):
    """The ledger refused a read: ``status`` (HTTP), ``detail`` (its words), ``field``."""

    def __init__(self, status: int, detail: str, field: str | None = None, *, url: str = "") -> None:
        self.status, self.detail, self.field, self.url = status, detail, field, url
        where = f" (field {field})" if field else ""
        super().__init__(f"HTTP {status} from {url}: {detail}{where}")


class Api:
    """A read-only view of one ledger (module doc).

    Args:
        url: the ledger; default ``$LINEAGE_URL`` or ``http://127.0.0.1:8000``.
        token: a reader token; default ``$LINEAGE_TOKEN`` (None: an open ledger).
        timeout: seconds per request.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = (url or os.environ.get("LINEAGE_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("LINEAGE_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- projects ---------------------------------------------------------------------------

    def projects(self) -> list[dict[str, Any]]:
        """Every project: slug, title, metric_name, lower_is_better, ..."""
        return list(self._get(f"{API}/projects"))

    def project(self, project: str) -> dict[str, Any]:
        return dict(self._get(_project(project)))

    # -- trials -----------------------------------------------------------------------------

    def trials(
        self,
        project: str,
        *,
        filter: str | None = None,
        status: Sequence[str] | None = None,
        sort: str = "seq",
        order: str = "asc",
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The project's trials as dicts (every field, ``extra`` included), in ``sort`` order
        (``seq``, ``metric``, a field, ``extra.KEY``; ``-`` descending), all pages or the
        first ``limit``. ``filter``: the ledger's filter language
        (``status = keep and extra.lr < 1e-3``)."""
        return list(self.iter_trials(project, filter=filter, status=status, sort=sort, order=order, limit=limit))

    def iter_trials(
        self,
        project: str,
        *,
        filter: str | None = None,
        status: Sequence[str] | None = None,
        sort: str = "seq",
        order: str = "asc",
        limit: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """:meth:`trials`, a page at a time (for projects of many trials)."""
        params: dict[str, Any] = {"sort": sort, "order": order, "count": "false"}
        if filter:
            params["filter"] = filter
        if status:
            params["status"] = list(status)
        left = limit
        cursor: str | None = None
        while left is None or left > 0:
            page_params = {**params, "limit": PAGE if left is None else min(PAGE, left)}
            if cursor:
                page_params["cursor"] = cursor
            page = self._get(f"{_project(project)}/trials", params=page_params)
            yield from page["items"]
            if left is not None:
                left -= len(page["items"])
            cursor = page.get("next_cursor")
            if not cursor or not page["items"]:
                return

    def trial(self, project: str, exp_id: str) -> dict[str, Any]:
        return dict(self._get(_trial(project, exp_id)))

    def trials_frame(self, project: str, **filters: Any) -> Any:
        """:meth:`trials` as a pandas DataFrame indexed by ``exp_id``: one column per trial
        field, and ``extra`` flattened into ``extra.KEY`` columns (nested keys joined by
        ``.``: ``extra.config.lr``). Needs pandas (an optional dependency)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Api.trials_frame needs pandas (pip install pandas); Api.trials gives dicts") from None
        rows = [_flat_trial(item) for item in self.iter_trials(project, **filters)]
        frame = pd.DataFrame(rows)
        return frame.set_index("exp_id", drop=False) if "exp_id" in frame else frame

    def best(self, project: str) -> dict[str, Any] | None:
        """The project's best trial (by its metric and direction), or None."""
        found = self._get(f"{_project(project)}/knowledge", params={"format": "json", "recent_n": 1, "last_m": 1}).get(
            "best"
        )
        return dict(found) if found else None

    def chain(self, project: str, exp_id: str) -> list[dict[str, Any]]:
        """The trial's chain of parents: the root first, the trial last."""
        return list(self._get(f"{_trial(project, exp_id)}/lineage")["chain"])

    # -- telemetry and knobs ----------------------------------------------------------------

    def telemetry(
        self,
        project: str,
        exp_id: str,
        *,
        names: Sequence[str] | None = None,
        max_points: int = 100_000,
        step_min: int | None = None,
        step_max: int | None = None,
    ) -> dict[str, dict[str, Any]]:
        """The trial's series: ``name -> {"step": [...], "value": [...]}`` (per-turn series
        as ``name[turn]``). A series longer than ``max_points`` comes min/max-bucketed, as
        the ledger sends it (``"min"``, ``"max"``, ``"mean"`` instead of ``"value"``)."""
        params: dict[str, Any] = {"max_points": max_points}
        if names:
            params["name"] = list(names)
        if step_min is not None:
            params["step_min"] = step_min
        if step_max is not None:
            params["step_max"] = step_max
        answer = self._get(f"{_trial(project, exp_id)}/telemetry", params=params)
        out: dict[str, dict[str, Any]] = {}
        for series in answer["series"]:
            key = series["name"] if series.get("turn") in (None, -1) else f"{series['name']}[{series['turn']}]"
            out[key] = {k: v for k, v in series.items() if k not in ("name", "turn") and v is not None}
        return out

    def knob_history(self, project: str, knob: str) -> dict[str, Any]:
        """What values a knob took across the project's trials and how each fared
        (``GET .../knobs/{knob}``): ``{"knob", "knobs", "tried", "values": [{"value",
        "number", "trials": [...]}]}``. A ledger without the route is an :class:`ApiError`
        saying so."""
        try:
            return dict(self._get(f"{_project(project)}/knobs/{quote(knob, safe='')}"))
        except ApiError as exc:
            if exc.status in (404, 405) and "not found" in exc.detail.lower() and "project" not in exc.detail.lower():
                raise ApiError(
                    exc.status,
                    "this ledger has no knob history (GET /api/v1/projects/{p}/knobs/{knob}); upgrade its server",
                    url=exc.url,
                ) from None
            raise

    # -- requests ---------------------------------------------------------------------------

    def _get(self, path: str, *, params: dict[str, Any] | None = None) -> Any:
        response = self._http.get(path, params=params)
        if response.status_code >= 400:
            detail, field = _problem(response)
            raise ApiError(response.status_code, detail, field, url=str(response.url))
        return response.json()


def _project(project: str) -> str:
    return f"{API}/projects/{quote(project, safe='')}"


def _trial(project: str, exp_id: str) -> str:
    return f"{_project(project)}/trials/{quote(exp_id, safe='')}"


def _problem(response: httpx.Response) -> tuple[str, str | None]:
    """The ``detail`` and ``field`` of a problem+json answer (else the text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase, None
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("title") or body), body.get("field")
    return str(body)[:300], None


def _flat_trial(trial: dict[str, Any]) -> dict[str, Any]:
    """A trial as one row: its fields, and ``extra`` flattened to ``extra.KEY`` columns."""
    row = {k: v for k, v in trial.items() if k != "extra"}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        else:
            row[prefix] = value

    walk("extra", trial.get("extra") or {})
    return row
