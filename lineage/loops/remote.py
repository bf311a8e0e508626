"""``lineage watch --server``: follow a results file into a ledger server over its
HTTP API (:class:`RemoteSync`); what it shares with the local follower is
:mod:`lineage.loops.follow`'s."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lineage.domain import BestPolicy
from lineage.errors import InvalidInput
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import ROW_KEY, SETTINGS_KEY, ImportOptions, Layout, LineageBuilder
from lineage.loops.follow import FileFollower, SyncReport, commit_of, linked_words, same_commit
from lineage.loops.git import link_git
from lineage.loops.importing import sniff_results_text


class RemoteSync(FileFollower):
    """``lineage watch --server URL --token T``: follows a results file into a ledger
    served over HTTP (the ``/api/v1`` routes), with :class:`ResultsSync`'s rules where
    the API allows them.

    * a project that does not exist is created by uploading the file
      (``POST .../trials.tsv?format=...&create=true`` with the column options, the
      direction inferred here), so the server stores the layout as a local import would;
    * each row is sent as ``POST .../trials`` with its exp_id (from :data:`BATCH_FROM`
      rows waiting at once, a catch-up, as ``POST .../trials:batch`` of
      :data:`BATCH_ROWS`, a batch with a rewritten row going row by row): the server stores a new
      one (201), recognises a replay (200: a restart adds nothing twice), or answers 409
      for a row rewritten in place, which is then ``PATCH``ed (status, metric,
      description, parent, extra: what the row gives), unless the trial stored under its
      exp_id has another commit than the row's: that one is never overwritten (a warning;
      the row is not sent);
    * a truncated file warns and deletes nothing; rows are identified by their number,
      and the exp_id rebasing of a local watch is not available over HTTP.
    """

    def __init__(
        self,
        server: str,
        token: str | None,
        project_slug: str,
        path: str | os.PathLike[str],
        *,
        fmt: str | None = None,
        options: ImportOptions = ImportOptions(),
        best_policy: BestPolicy | str | None = None,
        git_repo: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(project_slug, path, fmt=fmt, options=options, best_policy=best_policy, git_repo=git_repo)
        self.base = server.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout = timeout
        self.lower_is_better = True
        self.sent: dict[str, tuple[str, str]] = {}
        self.rows_seen = 0

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        data: str | None = None,
        query: Mapping[str, Any] | None = None,
    ) -> tuple[int, Any]:
        import json
        import urllib.error
        import urllib.parse
        import urllib.request

        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif data is not None:
            payload = data.encode("utf-8")
            headers["Content-Type"] = "text/tab-separated-values; charset=utf-8"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=payload, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's server
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        except urllib.error.URLError as exc:
            raise InvalidInput("server", f"{self.base} does not answer: {exc.reason}") from None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def _fail(self, status: int, answer: Any, what: str) -> None:
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        raise InvalidInput("server", f"{what}: HTTP {status}: {detail}")

    @staticmethod
    def _body(trial: Any) -> dict[str, Any]:
        return {
            k: v for k, v in trial.to_dict().items() if k not in ("seq", "created_at", "updated_at", "delta_vs_best")
        }

    def _send_batches(self, slug: str, pending: list[Any], report: SyncReport) -> list[Any]:
        """Send ``pending`` rows ``(trial, state)`` as JSON batches, in order; the rows of a
        batch the server refuses with 409 (a row rewritten in place) come back, to go one
        by one (a 201/200 row, or a 409 then PATCHed)."""
        left: list[Any] = []
        for first in range(0, len(pending), BATCH_ROWS):
            chunk = pending[first : first + BATCH_ROWS]
            status, answer = self._call(
                "POST", f"/projects/{slug}/trials:batch", body={"trials": [self._body(trial) for trial, _ in chunk]}
            )
            if status == 409:
                left.extend(chunk)
                continue
            if status not in (200, 201):
                self._fail(status, answer, f"recording exp_{chunk[0][0].exp_id}..exp_{chunk[-1][0].exp_id}")
            for (trial, state), result in zip(chunk, answer["results"]):
                if result["created"]:
                    report.inserted.append(trial.exp_id)
                self.sent[trial.exp_id] = state
        return left

    def _send_row(self, slug: str, trial: Any, report: SyncReport) -> None:
        status, answer = self._call("POST", f"/projects/{slug}/trials", body=self._body(trial))
        if status == 201:
            report.inserted.append(trial.exp_id)
        elif status == 409:
            existing = (answer or {}).get("existing") or {}
            held, mine = commit_of(existing, self.layout), commit_of(trial, self.layout)
            if same_commit(held, mine) is False:
                report.warnings.append(
                    f"{self.source}: exp_{trial.exp_id} on the server holds commit {held}, not the row's {mine}; "
                    "the row is not sent, and nothing is overwritten"
                )
                return
            stored = existing.get("extra")
            held_extra: dict[str, Any] = stored if isinstance(stored, dict) else {}
            hypothesis, words = linked_words(
                str(existing.get("hypothesis") or ""), held_extra, trial.hypothesis, linking=ROW_KEY not in held_extra
            )
            patch = {
                "status": trial.status.value,
                "core_metric": trial.core_metric,
                "val_bpb": trial.val_bpb,
                "hypothesis": hypothesis,
                "parent_exp": trial.parent_exp,
                "extra": {**trial.extra, **words},
            }
            patch = {k: v for k, v in patch.items() if existing.get(k, _MISSING) != v}
            if patch:
                status, answer = self._call(
                    "PATCH", f"/projects/{slug}/trials/{urllib_quote(trial.exp_id)}", body=patch
                )
                if status != 200:
                    self._fail(status, answer, f"updating exp_{trial.exp_id}")
                report.updated.append(trial.exp_id)
        elif status != 200:
            self._fail(status, answer, f"recording exp_{trial.exp_id}")

    def _start(self, text: str, report: SyncReport) -> bool:
        slug = urllib_quote(self.slug)
        status, answer = self._call("GET", f"/projects/{slug}")
        if status == 404:
            fmt = self.fmt or sniff_results_text(text)
            table = ar.parse_table(text, source=self.source, fmt=fmt, options=self.options)
            lower, _how = ar.decide_direction(table, self.options.lower_is_better, report.warnings)
            query = {
                **self.options.to_text(),
                "format": fmt,
                "create": "true",
                "direction": "lower" if lower else "higher",
                "best_policy": BestPolicy(self.best_policy or BestPolicy.KEPT).value,
            }
            status, answer = self._call("POST", f"/projects/{slug}/trials.tsv", data=text, query=query)
            if status != 201:
                self._fail(status, answer, "importing the file")
            report.warnings.extend(table.warnings)
            report.inserted.extend(table.layout.exp_id(i) for i in range(len(table.rows)))
            status, answer = self._call("GET", f"/projects/{slug}")
        if status != 200:
            self._fail(status, answer, f"reading project {self.slug!r}")
        settings = answer.get("settings") or {}
        if not isinstance(settings.get(SETTINGS_KEY), Mapping):
            raise InvalidInput(
                "project",
                f"project {self.slug!r} on the server has no results-file layout; "
                "import the file into it first (lineage import, or POST .../trials.tsv?format=autoresearch)",
            )
        self.layout = Layout.from_dict(settings[SETTINGS_KEY])
        self.lower_is_better = bool(answer.get("lower_is_better", True))
        return True

    def _sync(self) -> SyncReport:
        report = SyncReport()
        text = self._read()
        if text is None or not text.strip():
            return report
        if self.layout is None:
            self._start(text, report)
        assert self.layout is not None
        start = ar.header_end(ar.split_lines(text), self.layout) if self.layout.has_header else 0
        parser = ar.RowParser(self.layout, source=self.source, first_line=start + 1)
        parser.feed(ar.split_lines(text)[start:])
        builder = LineageBuilder(self.layout, lower_is_better=self.lower_is_better, source=self.source)
        builder.name(parser.rows, first_row=0, lines=parser.lines)
        report.warnings.extend(parser.warnings)
        if len(parser.rows) < self.rows_seen:
            report.warnings.append(
                f"{self.source} was truncated: it holds {len(parser.rows)} rows, {self.rows_seen} before; "
                "nothing is deleted"
            )
        self.rows_seen = max(self.rows_seen, len(parser.rows))
        trials = list(parser.rows)
        if self.git_repo is not None:
            report.warnings.extend(link_git(trials, self.layout, self.git_repo))
        slug = urllib_quote(self.slug)
        pending = []
        for trial, text_of_row in zip(trials, parser.texts):
            state = (text_of_row, trial.parent_exp)
            if self.sent.get(trial.exp_id) != state:
                pending.append((trial, state))
        if len(pending) >= BATCH_FROM:
            pending = self._send_batches(slug, pending, report)
        for trial, state in pending:
            self._send_row(slug, trial, report)
            self.sent[trial.exp_id] = state
        report.rows = len(parser.rows)
        return report


_MISSING = object()
#: Rows waiting at once from which ``watch --server`` sends them as JSON batches (a catch-up).
BATCH_FROM = 20
#: Rows per ``POST .../trials:batch`` (the server's limit is lineage.domain.MAX_BATCH).
BATCH_ROWS = 500


def urllib_quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
