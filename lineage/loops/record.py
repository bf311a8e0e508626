"""``lineage record``: one trial from an agent's shell, optionally appended to the
results file in the file's own format (cooperating with ``lineage watch``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.domain import Project, Trial
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import GIT_KEY, LINE_KEY, ROW_KEY, SETTINGS_KEY, ImportOptions, Layout
from lineage.loops.git import git_details
from lineage.loops.importing import layout_of, read_results_text, results_metric_name, sniff_results_text
from lineage.loops.watch import ResultsSync

if TYPE_CHECKING:
    from lineage.service import Ledger


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What ``lineage record`` did."""

    trial: Trial
    created: bool
    best_before: Trial | None
    is_new_best: bool
    metric_name: str
    #: the status word as written (the file's word for the label)
    word: str
    #: the line appended to the results file, if any
    line: str | None
    #: earlier trials close to this one (lineage.similar; Similar objects)
    similar_prior: tuple[Any, ...] = ()
    #: what the recording rules said about the trial (lineage.service.recording.prepare_record)
    warnings: tuple[str, ...] = ()
    #: its delta against the project's noise floor (lineage.noise.NoiseVerdict); None on a replay
    noise: Any = None
    #: a sweep or a repeat of earlier trials (lineage.knobs.sweeps.TriedBefore objects)
    tried_before: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "exp_id": self.trial.exp_id,
            "metric_name": self.metric_name,
            "metric": self.trial.core_metric,
            "status": self.trial.status.value,
            "status_word": self.word,
            "parent_exp": self.trial.parent_exp,
            "delta_vs_best": self.trial.delta_vs_best,
            "best_before": self.best_before.exp_id if self.best_before else None,
            "best_before_metric": self.best_before.core_metric if self.best_before else None,
            "is_new_best": self.is_new_best,
            "created": self.created,
            "line": self.line,
            "similar_prior": [similar.to_dict() for similar in self.similar_prior],
            "warnings": list(self.warnings),
            "noise": self.noise.to_dict() if self.noise is not None else None,
            "tried_before": [said.to_dict() for said in self.tried_before],
        }


def _column_like(layout: Layout, *words: str) -> str | None:
    for name in layout.columns:
        if set(ar.name_tokens(name)) & set(words):
            return name
    return None


def record_result(
    ledger: Ledger,
    project_slug: str,
    *,
    metric: str | float | None,
    status: str,
    description: str = "",
    commit: str | None = None,
    memory_gb: str | float | None = None,
    values: Mapping[str, str] | None = None,
    append_to: str | os.PathLike[str] | None = None,
    git_repo: str | os.PathLike[str] | None = None,
    metric_name: str | None = None,
    lower_is_better: bool | None = None,
    idempotency_key: str | None = None,
    rerun_of: str | None = None,
) -> RecordOutcome:
    """Record one trial of a loop: status word mapped like the file's, parent = the branch
    tip (``Trials.tip``, the last keep or baseline: the results file's own lineage rule,
    which ``lineage watch`` re-reads, and the parent every writer's omitted parent is),
    ``delta_vs_best`` from the service. With ``append_to``,
    the file is synced first and the trial's line is appended in the file's own format.

    A missing project is created: from ``append_to`` when that file exists (imported
    first), else with autoresearch's own columns, ``metric_name`` (default ``val_bpb``)
    and the direction from ``lower_is_better`` or the name.

    Idempotent: a second record with the same ``idempotency_key`` and the same options
    (the trial's status, metric, description, commit, memory and ``values``) answers the
    trial the first stored (``created=False``) and appends nothing; with other options it
    is a :class:`Conflict` naming the key (the ledger's Idempotency-Key rule, compared on
    :func:`record_request`). Without a key, a record with a commit uses one made of its
    options (:func:`replay_key`): the same commit with the same values is a replay.

    ``rerun_of``: the exp_id of a trial of the project this one reruns (the same code
    again), for the noise floor (``lineage.noise``).
    """
    path = Path(append_to) if append_to is not None else None
    project = _project_for_record(ledger, project_slug, path, metric_name, lower_is_better, git_repo)
    if path is not None:  # the file the project follows, and no other (lineage.loops.followed)
        path = Path(ledger.files.follow(project_slug, path, field="append_tsv"))
        project = ledger.projects.project(project_slug)
    layout = layout_of(project)
    file_rows: int | None = None
    pending_text = ""  # text after the file's last row (a summary): it now precedes the new row
    if path is not None:
        if layout is not None and path.exists() and path.stat().st_size:
            sync = ResultsSync(ledger, project_slug, path, git_repo=git_repo)
            sync.sync()
            file_rows = sync.file_rows
            project = ledger.projects.project(project_slug)
            layout = layout_of(project)
            if sync.parser is not None and layout is not None:
                pending_text = sync.parser.trailer()[0]
                if not sync.done_text.endswith("\n") and sync.done_text:
                    pending_text = ""  # the last line is completed by the line end written below
        if layout is None:
            layout = ar.default_layout(project.metric_name)
            ledger.files.save_results_layout(project_slug, layout)
    work = layout or ar.default_layout(project.metric_name)
    label, _known = ar.map_status(status, work.status_map)
    word = status.strip()
    if word == label.value:
        word = work.words.get(label.value, word)
    value = ar.metric_value(str(metric), label) if metric is not None else None
    if value is False:
        raise InvalidInput("metric", f"{metric!r} is not a number")
    request = record_request(
        status=status, metric=metric, description=description, commit=commit, memory_gb=memory_gb, values=values
    )
    if rerun_of:  # only then: the replay keys of records without one stay as they were
        request["rerun_of"] = rerun_of
    key = idempotency_key if idempotency_key is not None else replay_key(request) if commit else None
    extra: dict[str, Any] = {}
    if work.status and word != label.value:
        extra[work.extra_key(work.status)] = word
    commit_column = work.commit or "commit"
    if commit:
        extra[work.extra_key(commit_column)] = commit.strip()
    if memory_gb is not None:
        memory_column = _column_like(work, "memory", "mem", "vram") or "memory_gb"
        extra[work.extra_key(memory_column)] = _typed_value(memory_gb, memory_column, work)
    for name, raw in (values or {}).items():
        if name not in work.columns:
            raise InvalidInput("set", f"no column {name!r}; the columns are {', '.join(work.columns)}")
        extra[work.extra_key(name)] = _typed_value(raw, name, work)
    tip = ledger.trials.tip(project_slug)  # the parent every writer's omitted parent is
    parent = tip.exp_id if tip else ""
    first = ledger.trials.first(project_slug)
    fields: dict[str, Any] = {
        "status": label,
        "core_metric": value,
        "hypothesis": description,
        "parent_exp": parent,
        "baseline_exp": first.exp_id if first else "",
    }
    if work.metric == "val_bpb":
        fields["val_bpb"] = value
    if git_repo is not None and commit:
        parent_commit = None
        if parent:
            parent_trial = ledger.trials.trial(project_slug, parent)
            parent_commit = parent_trial.extra.get(work.extra_key(commit_column))
        details = git_details(git_repo, commit, parent_commit if isinstance(parent_commit, str) else None)
        if details is not None:
            extra[GIT_KEY] = details
    line: str | None = None
    exp_id: str | None = None
    if path is not None and layout is not None:
        rows = file_rows or 0
        if layout.id_column is None:
            exp_id = layout.exp_id(rows)
            taken = ledger.trials.find_trial(project_slug, exp_id) is not None
            number = ledger.files.next_exp_number(project_slug)
            if taken:
                layout.segments.append([rows, number])
                exp_id = layout.exp_id(rows)
                ledger.files.save_results_layout(project_slug, layout)
        else:
            exp_id = (values or {}).get(layout.id_column) or commit
            if not exp_id:
                raise InvalidInput(
                    "id", f"the file names trials by column {layout.id_column!r}: pass --set {layout.id_column}=ID"
                )
        preview = Trial(exp_id, extra=extra, **{k: v for k, v in fields.items()})
        parent_value = None
        if layout.parent and parent:
            parent_commit = ledger.trials.trial(project_slug, parent).extra.get(layout.extra_key(commit_column))
            parent_value = parent_commit if isinstance(parent_commit, str) and parent_commit else parent
        line = ar.render_row(preview, layout, parent_value=parent_value)
        if layout.parent and parent_value is not None:
            extra[layout.extra_key(layout.parent)] = parent_value
        extra[LINE_KEY] = pending_text + line
        extra[ROW_KEY] = rows
        if pending_text and layout.trailer:
            layout.trailer = ""  # written before this trial's line from now on
            ledger.files.save_results_layout(project_slug, layout)
    body = {**fields, "extra": extra}
    if rerun_of:
        body["rerun_of"] = rerun_of
    if exp_id is not None:
        body["exp_id"] = exp_id
    result = ledger.recording.record_trial(
        project_slug, body, similar_prior=True, idempotency_key=key, key_request=request if key else None
    )
    if not result.created:
        line = None  # recorded before, and its line appended then
    if path is not None and line is not None:
        _append_line(path, line, layout)  # type: ignore[arg-type]
    return RecordOutcome(
        trial=result.trial,
        created=result.created,
        best_before=result.best_before,
        is_new_best=result.is_new_best,
        metric_name=project.metric_name,
        word=word,
        line=line,
        similar_prior=result.similar_prior,
        warnings=result.warnings,
        noise=result.noise,
        tried_before=result.tried_before,
    )


def record_request(
    *,
    status: str,
    metric: str | float | None,
    description: str,
    commit: str | None,
    memory_gb: str | float | None,
    values: Mapping[str, str] | None,
) -> dict[str, Any]:
    """What a ``lineage record`` asks for, for its idempotency key: the options that say
    what the trial is (not where it is appended, nor the parent and row the ledger's state
    gives it). A metric is compared as a number (``0.99`` is ``0.990``)."""
    number = ar.parse_number(str(metric)) if metric is not None else None
    return {
        "status": status.strip(),
        "metric": number if isinstance(number, float) else (str(metric).strip() if metric is not None else None),
        "description": description,
        "commit": commit.strip() if commit else None,
        "memory_gb": str(memory_gb).strip() if memory_gb is not None else None,
        "values": sorted((values or {}).items()),
    }


def replay_key(request: Mapping[str, Any]) -> str:
    """The idempotency key of a record given none: made of its request, so the same
    ``lineage record`` run again (a retry, a replayed shell history) is a replay."""
    import hashlib
    import json

    text = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "lineage-record-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def _typed_value(raw: Any, column: str, layout: Layout) -> Any:
    if not isinstance(raw, str):
        return raw
    return ar.typed_cell(raw) if column in layout.numeric or column not in layout.columns else raw


def _append_line(path: Path, line: str, layout: Layout) -> None:
    exists = path.exists() and path.stat().st_size > 0
    with open(path, "a+b") as fh:
        out = b""
        if not exists:
            out += layout.header_text.encode("utf-8")
        else:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                out += layout.newline.encode("utf-8")
        out += line.encode("utf-8")
        fh.seek(0, os.SEEK_END)
        fh.write(out)


def _project_for_record(
    ledger: Ledger,
    slug: str,
    path: Path | None,
    metric_name: str | None,
    lower_is_better: bool | None,
    git_repo: Any,
) -> Project:
    try:
        return ledger.projects.project(slug)
    except NotFound:
        pass
    if path is not None and path.exists() and path.stat().st_size:
        text = read_results_text(path, source=str(path))
        ledger.files.import_results(
            slug,
            text,
            fmt=sniff_results_text(text),
            source=str(path),
            options=ImportOptions(lower_is_better=lower_is_better),
            git_repo=git_repo,
            followed=path,
        )
        return ledger.projects.project(slug)
    name = metric_name or "val_bpb"
    lower, _how = ar.infer_direction(name, [], lower_is_better)
    layout = ar.default_layout(name)
    try:
        return ledger.projects.create_project(
            slug,
            metric_name=results_metric_name(name),
            lower_is_better=lower,
            source_format=ar.NAME,
            settings={SETTINGS_KEY: layout.to_dict()},
        )
    except Conflict:
        return ledger.projects.project(slug)
