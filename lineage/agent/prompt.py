"""The prompt wrapper: the session-start prompt inside the project's Jinja2 template.

Owns: the sandboxed template environment (templates come from API users), the default
wrapper (``templates/prompt_wrapper.md.j2``), :func:`check_prompt_template` and
:func:`wrap_prompt` with the variables a template sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lineage.agent.render import inline_text
from lineage.domain import FailureLabel, Lease, Project, Trial
from lineage.errors import InvalidInput
from lineage.loops.followed import followed_file
from lineage.notebook import PROMPT_NOTE_CHARS, PROMPT_NOTES

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from lineage.alerts import Alert
    from lineage.monitor import progress
    from lineage.notebook import Note

#: Longest prompt template a project may hold, in characters.
MAX_PROMPT_TEMPLATE = 65_536
#: Who asks for a prompt: its recording instructions follow (``wrap_prompt``'s ``face``).
PROMPT_FACES = ("http", "mcp", "cli")
#: Where the default prompt wrapper lives (in ``lineage.templates``).
DEFAULT_PROMPT_TEMPLATE_FILE = "prompt_wrapper.md.j2"


def _template_environment() -> ImmutableSandboxedEnvironment:
    """The Jinja2 environment of prompt templates: sandboxed (templates come from API
    users), no autoescaping (the output is Markdown), trailing newline kept."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        _ENVIRONMENT = ImmutableSandboxedEnvironment(autoescape=False, keep_trailing_newline=True)
    return _ENVIRONMENT


_ENVIRONMENT: ImmutableSandboxedEnvironment | None = None
_COMPILED: dict[str, Any] = {}


def _compiled(source: str) -> Template:
    """The compiled template of ``source`` (a pure function of the text, so caching it is
    safe across projects and server instances)."""
    template = _COMPILED.get(source)
    if template is None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        template = _COMPILED[source] = _template_environment().from_string(source)
    return template


def default_prompt_template() -> str:
    """The text of ``templates/prompt_wrapper.md.j2``, the wrapper of projects without one."""
    global _DEFAULT_TEMPLATE
    if _DEFAULT_TEMPLATE is None:
        from importlib.resources import files

        _DEFAULT_TEMPLATE = (
            files("lineage.templates").joinpath(DEFAULT_PROMPT_TEMPLATE_FILE).read_text(encoding="utf-8")
        )
    return _DEFAULT_TEMPLATE


_DEFAULT_TEMPLATE: str | None = None


def check_prompt_template(source: str) -> str:
    """``source`` if it is a prompt template that compiles and renders; else
    :class:`InvalidInput` (field ``prompt_template``, with the line of a syntax error)."""
    if not isinstance(source, str):
        raise InvalidInput("prompt_template", "must be text")
    if len(source) > MAX_PROMPT_TEMPLATE:
        raise InvalidInput("prompt_template", f"is {len(source)} characters long; the limit is {MAX_PROMPT_TEMPLATE}")
    from jinja2 import TemplateSyntaxError

    try:
        _compiled(source)
    except TemplateSyntaxError as exc:
        raise InvalidInput(
            "prompt_template", f"is not a valid Jinja2 template: {exc.message}", line=exc.lineno
        ) from None
    sample = Project(slug="sample", title="Sample", metric_name="core_metric")
    wrap_prompt(
        sample,
        "# Session start\n",
        specialist="s",
        timestamp="",
        next_exp_id="001",
        best=Trial(exp_id="000", core_metric=1.0),
        base_url=None,
        source=source,
    )
    return source


def wrap_prompt(
    project: Project,
    prompt: str,
    *,
    specialist: str,
    timestamp: str,
    next_exp_id: str,
    best: Trial | None,
    base_url: str | None,
    tip: Trial | None = None,
    source: str | None = None,
    summary: progress.Progress | None = None,
    alerts: Sequence[Alert] = (),
    face: str = "http",
    layout: Any = None,
    tokens: bool = False,
    running: Sequence[Lease] = (),
    notes: Sequence[Note] = (),
    notes_total: int = 0,
    knobs_tried: Sequence[str] = (),
) -> str:
    """The prompt inside the project's template (``source`` overrides it).

    Every variable is inserted as one line's worth of text: each text in it (the title,
    the metric name, the specialist, the best trial's fields, ...) has been through
    ``render.inline_text``, the folding trial text gets in the prompt itself, so no value
    can add a heading, a list item, a table row or a code fence; only the template's own
    text (and ``prompt``, ``curl_example``, ``progress``, which the ledger builds of
    folded parts) has line breaks.

    The template sees: ``prompt`` (the lineage prompt, verbatim), ``project`` (slug,
    title, metric_name, lower_is_better, direction ``"lower"``/``"higher"``,
    best_policy, revision, trial_count), ``specialist``, ``timestamp``, ``next_exp_id``,
    ``best`` (the best trial's fields, or None) and ``best_commit``, ``tip`` (the branch
    tip's fields, the last keep or baseline, which a trial without ``parent_exp`` forks
    from; or None) and ``tip_commit``, ``statuses`` (the
    status words this loop uses) and ``all_statuses`` (every label), ``face`` (who asks:
    ``mcp``, ``http`` or ``cli``), ``results_file`` (a project fed by a watched results
    file: its ``path`` (the file it follows, :mod:`lineage.loops.followed`; None when the
    ledger was not told), ``columns``, ``delimiter`` name, ``metric``, ``status``,
    ``description`` and ``commit`` columns; else None), ``record_command`` (a ``lineage
    record --append-tsv`` line for such a project, naming that file), ``mcp_example`` (record_trial's arguments as JSON),
    ``base_url``, ``record_url`` (where to POST a trial) and ``curl_example`` (a complete,
    shell-safe script that records a trial: a ``KEY=`` line that makes the Idempotency-Key
    once, then the ``curl`` command, which a retry runs again with the same ``$KEY``: see
    :func:`curl_example`), ``token_needed`` (``tokens``: the ledger has tokens, so the
    example sends ``$LINEAGE_TOKEN``) and ``token_command`` (how a token is made);
    ``progress`` (the short form of the progress
    summary, ``lineage.progress.Progress.short_text``; "" without ``summary``), ``trend``
    and ``guardrails_tripped`` (a message per tripped guardrail); ``alerts``: a line per
    alert of the training code (newest first, :func:`alert_line`); ``running``: a line per
    trial under way (status running, oldest first, :func:`running_line`); ``notes``: a
    line per note of the notebook it carries (those citing the best first, then those
    citing a kept trial, newest first within each; :func:`note_line`, flagged when a
    later trial contradicts it), ``notes_total`` how many the project has and
    ``notes_budget`` the most it carries (``lineage.notebook``); ``knobs_tried``: the
    "Knobs tried" section's lines (``lineage.agent.knob_section``, within its stated budget).

    The examples leave ``parent_exp`` out (the ledger forks from the branch tip, the last keep) and
    carry the commit in ``extra`` where the project's trials have one, so that ``lineage
    watch`` links the file's row to a trial recorded through the API.
    """
    import json
    import shlex
    from urllib.parse import quote

    root = inline_text((base_url or "$LINEAGE_URL").rstrip("/"))
    record_url = f"{root}/api/v1/projects/{quote(project.slug, safe='')}/trials"
    metric_name, specialist, timestamp = (
        inline_text(project.metric_name),
        inline_text(specialist),
        inline_text(timestamp),
    )
    next_exp_id = inline_text(next_exp_id)
    commit_column = (layout.commit if layout is not None else None) or "commit"
    commit_key = layout.extra_key(commit_column) if layout is not None else commit_column
    best_commit = best.extra.get(commit_key) if best is not None else None
    best_commit = inline_text(best_commit) if isinstance(best_commit, str) and best_commit else None
    tip_commit = tip.extra.get(commit_key) if tip is not None else None
    tip_commit = inline_text(tip_commit) if isinstance(tip_commit, str) and tip_commit else None
    example: dict[str, Any] = {"status": "keep", "core_metric": None, "hypothesis": "<what you changed and why>"}
    if layout is None:
        example = {
            **({"specialist": specialist} if specialist else {}),
            **example,
            "expected_delta": f"<e.g. -0.002 on {metric_name}>",
            "notes": "",
        }
    if best_commit is not None or layout is not None and layout.commit:
        example["extra"] = {commit_column: "<the trial's commit>"}
    body = json.dumps(example, indent=2, ensure_ascii=False)
    mcp_example = json.dumps(
        {"project": project.slug, "trial": example, "idempotency_key": "<a fresh uuid>"}, indent=2, ensure_ascii=False
    )
    results_file = None
    record_command = ""
    words = dict(layout.words) if layout is not None else {}
    if layout is not None:
        followed = followed_file(project)
        results_file = {
            "path": inline_text(followed) if followed else None,
            "columns": list(layout.columns),
            "delimiter": "comma" if layout.delimiter == "," else "tab",
            "metric": layout.metric,
            "status": layout.status,
            "description": layout.description,
            "commit": layout.commit,
        }
        name = followed or UNNAMED_FILE
        parts = [
            "lineage",
            "record",
            "-p",
            project.slug,
            "--metric",
            "<" + metric_name + ">",
            "--status",
            words.get("keep", "keep"),
            "-d",
            '"<what you changed>"',
        ]
        if layout.commit:
            parts += ["--commit", "<commit>"]
        memory = next((c for c in layout.columns if "mem" in c.lower()), None)
        if memory:
            parts += ["--memory-gb", "<" + memory + ">"]
        parts += ["--append-tsv", name]
        record_command = " ".join(part if part[:1] in '<"' else shlex.quote(part) for part in parts)
    used = (summary.by_status if summary is not None else {}) or {}
    labels = [
        label.value
        for label in FailureLabel
        if label.value in used or label.value in words or label.value in ("keep", "discard", "crash")
    ]
    context = {
        "prompt": prompt,
        "project": _inline(
            {
                "slug": project.slug,
                "title": project.title,
                "metric_name": metric_name,
                "lower_is_better": project.lower_is_better,
                "direction": "lower" if project.lower_is_better else "higher",
                "best_policy": project.best_policy.value,
                "revision": project.revision,
                "trial_count": project.trial_count,
            }
        ),
        "specialist": specialist,
        "timestamp": timestamp,
        "next_exp_id": next_exp_id,
        "best": _inline(best.to_dict()) if best is not None else None,
        "best_commit": best_commit,
        "tip": _inline(tip.to_dict()) if tip is not None else None,
        "tip_commit": tip_commit,
        "statuses": _inline([words.get(label, label) for label in labels]),
        "all_statuses": [label.value for label in FailureLabel],
        "face": face,
        "results_file": _inline(results_file),
        "record_command": inline_text(record_command),
        "mcp_example": mcp_example,
        "base_url": root,
        "record_url": record_url,
        "curl_example": curl_example(record_url, body, token=tokens),
        "token_needed": tokens,
        "token_command": TOKEN_COMMAND,
        "progress": _inline_lines(summary.short_text()) if summary is not None else "",
        "trend": summary.trend if summary is not None else None,
        "guardrails_tripped": _inline(
            [t["message"] for t in ((summary.guardrails or {}).get("tripped", ()) if summary else ())]
        ),
        "alerts": [alert_line(alert) for alert in alerts],
        "running": [running_line(lease) for lease in running],
        "notes": [note_line(note, best.exp_id if best is not None else None) for note in notes],
        "notes_total": notes_total,
        "notes_budget": f"at most {PROMPT_NOTES} notes, {PROMPT_NOTE_CHARS} characters each",
        "knobs_tried": list(knobs_tried),
    }
    text = source if source is not None else (project.prompt_template or default_prompt_template())
    try:
        return _compiled(text).render(context)
    except Exception as exc:  # a user's template: any failure is theirs to fix
        raise InvalidInput("prompt_template", f"fails to render: {type(exc).__name__}: {exc}") from None


#: The file of ``record_command`` for a project that follows no named file (imported over HTTP).
UNNAMED_FILE = "<results file>"
#: How a ledger's owner makes the token an HTTP writer sends (``lineage token create``).
TOKEN_COMMAND = "lineage token create --name <agent> --role writer"
#: The first line of the HTTP example: one Idempotency-Key per trial, made with Python
#: alone (``uuidgen`` is missing from many images, and ``$(uuidgen)`` inline made a new
#: key, so a second trial, on every retry), printed so that a retry from a new shell can
#: set it again.
KEY_LINE = "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())'); echo \"Idempotency-Key: $KEY\""


def curl_example(record_url: str, body: str, *, token: bool) -> str:
    """The HTTP example of the prompt: :data:`KEY_LINE`, then a ``curl`` POST of ``body``
    (JSON) to ``record_url`` with ``Idempotency-Key: $KEY``, which stops with an error
    when ``KEY`` is unset (curl would drop the empty header, and a retry would record a
    second trial). ``token``: the ledger has tokens, so the command sends
    ``Authorization: Bearer $LINEAGE_TOKEN``; without tokens it sends no such header (an
    empty ``Bearer`` is refused)."""
    auth = '  -H "Authorization: Bearer ${LINEAGE_TOKEN:?set LINEAGE_TOKEN to a writer token}" \\\n' if token else ""
    return (
        f"{KEY_LINE}\n"
        f'curl -sS -X POST "{record_url}" \\\n'
        f"{auth}"
        '  -H "Content-Type: application/json" \\\n'
        '  -H "Idempotency-Key: ${KEY:?run the KEY= line first}" \\\n'
        "  --data-binary @- <<'JSON'\n"
        f"{body}\nJSON"
    )


def running_line(lease: Lease) -> str:
    """One running trial as a line of the prompt: id, owner, since when, last heartbeat and
    hypothesis, each folded to one line (the renderer's rule)."""
    owner = f" by {inline_text(lease.owner, 80)}" if lease.owner else ""
    since = f", since {_minute(lease.since)}" if lease.since else ""
    beat = f" (last heartbeat {_minute(lease.heartbeat_at)})" if lease.heartbeat_at else ""
    hypothesis = f": {inline_text(lease.hypothesis, 200)}" if lease.hypothesis.strip() else ""
    return f"- exp {inline_text(lease.exp_id, 40)}{owner}{since}{beat}{hypothesis}"


def _minute(stamp: str) -> str:
    return f"{stamp[:16].replace('T', ' ')} UTC"


def alert_line(alert: Alert) -> str:
    """One alert as a line of the prompt: level, trial, step, time, title and text, each
    folded to one line and fence-safe (the renderer's rule), title and text truncated."""
    step = f" at step {alert.step}" if alert.step is not None else ""
    when = f" ({alert.created_at[:16].replace('T', ' ')} UTC)" if alert.created_at else ""
    text = f": {inline_text(alert.text, 200)}" if alert.text.strip() else ""
    return (
        f"- ALERT ({alert.level}) from exp {inline_text(alert.exp_id, 40)}{step}{when}: "
        f"**{inline_text(alert.title, 120)}**{text}"
    )


def note_line(note: Note, best_exp: str | None) -> str:
    """One note of the notebook as a line of the prompt: its id, text (folded, cut to
    ``PROMPT_NOTE_CHARS``), the trials it cites with their status (``best`` for the
    current best) and, when a later trial contradicts it, a flag naming that trial."""
    cited = ", ".join(
        f"exp {inline_text(exp_id, 40)} ({'best' if exp_id == best_exp else status or 'deleted'})"
        for exp_id, status in note.cites
    )
    line = f"- note {note.id}: {inline_text(note.text, PROMPT_NOTE_CHARS)} (cites {cited})"
    if note.contradicted is not None:
        line += f" **CONTRADICTED**: {inline_text(note.contradicted.why, 200)}; revise or drop it"
    return line


def _inline(value: Any) -> Any:
    """``value`` with every text in it (keys too) through :func:`inline_text`: a template
    may put any variable anywhere, so none may bring a line break or a code fence."""
    if isinstance(value, str):
        return inline_text(value)
    if isinstance(value, dict):
        return {inline_text(k) if isinstance(k, str) else k: _inline(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_inline(v) for v in value]
    return value


def _inline_lines(text: str) -> str:
    """A text of several lines made by the ledger (the progress summary): each line
    through :func:`inline_text`, so a value inside one cannot start another."""
    return "\n".join(inline_text(line) for line in text.split("\n"))
