"""The prompt wrapper: the session-start prompt inside the project's Jinja2 template.

Owns: the sandboxed template environment (templates come from API users), the default
wrapper (``templates/prompt_wrapper.md.j2``), :func:`check_prompt_template` and
:func:`wrap_prompt` with the variables a template sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from lineage.agent.render import _text as _inline  # the renderer's folding and fence rule
from lineage.domain import FailureLabel, Project, Trial
from lineage.errors import InvalidInput

if TYPE_CHECKING:
    from lineage.alerts import Alert
    from lineage.monitor import progress

#: Longest prompt template a project may hold, in characters.
MAX_PROMPT_TEMPLATE = 65_536
#: Where the default prompt wrapper lives (in ``lineage.templates``).
DEFAULT_PROMPT_TEMPLATE_FILE = "prompt_wrapper.md.j2"



def _template_environment():  # type: ignore[no-untyped-def]
    """The Jinja2 environment of prompt templates: sandboxed (templates come from API
    users), no autoescaping (the output is Markdown), trailing newline kept."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        _ENVIRONMENT = ImmutableSandboxedEnvironment(autoescape=False, keep_trailing_newline=True)
    return _ENVIRONMENT


_ENVIRONMENT = None
_COMPILED: dict[str, Any] = {}


def _compiled(source: str):  # type: ignore[no-untyped-def]
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

        _DEFAULT_TEMPLATE = files("lineage.templates").joinpath(DEFAULT_PROMPT_TEMPLATE_FILE).read_text(encoding="utf-8")
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
        raise InvalidInput("prompt_template", f"is not a valid Jinja2 template: {exc.message}", line=exc.lineno) from None
    sample = Project(slug="sample", title="Sample", metric_name="core_metric")
    wrap_prompt(sample, "# Session start\n", specialist="s", timestamp="", next_exp_id="001",
                best=Trial(exp_id="000", core_metric=1.0), base_url=None, source=source)
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
    source: str | None = None,
    summary: "progress.Progress | None" = None,
    alerts: "Sequence[Alert]" = (),
) -> str:
    """The prompt inside the project's template (``source`` overrides it).

    The template sees: ``prompt`` (the lineage prompt, verbatim), ``project`` (slug,
    title, metric_name, lower_is_better, direction ``"lower"``/``"higher"``,
    best_policy, revision, trial_count), ``specialist``, ``timestamp``, ``next_exp_id``,
    ``best`` (the best trial's fields, or None), ``statuses`` (the labels),
    ``base_url``, ``record_url`` (where to POST a trial) and ``curl_example`` (a
    complete, shell-safe command that records a trial); ``progress`` (the short form of
    the progress summary, ``lineage.progress.Progress.short_text``; "" without
    ``summary``), ``trend`` and ``guardrails_tripped`` (a message per tripped guardrail);
    ``alerts``: a line per alert of the training code (newest first, :func:`alert_line`).
    """
    import json
    from urllib.parse import quote

    root = (base_url or "$LINEAGE_URL").rstrip("/")
    record_url = f"{root}/api/v1/projects/{quote(project.slug, safe='')}/trials"
    example: dict[str, Any] = {"exp_id": next_exp_id}
    if best is not None:
        example["parent_exp"] = best.exp_id
    example.update(specialist=specialist, hypothesis="<what you changed and why>",
                   expected_delta="<e.g. -0.002 on " + project.metric_name + ">", status="keep", core_metric=None,
                   notes="")
    body = json.dumps(example, indent=2, ensure_ascii=False)
    curl_example = (
        f'curl -sS -X POST "{record_url}" \\\n'
        '  -H "Authorization: Bearer $LINEAGE_TOKEN" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        '  -H "Idempotency-Key: $(uuidgen)" \\\n'
        "  --data-binary @- <<'JSON'\n"
        f"{body}\nJSON"
    )
    context = {
        "prompt": prompt,
        "project": {
            "slug": project.slug, "title": project.title, "metric_name": project.metric_name,
            "lower_is_better": project.lower_is_better, "direction": "lower" if project.lower_is_better else "higher",
            "best_policy": project.best_policy.value, "revision": project.revision, "trial_count": project.trial_count,
        },
        "specialist": specialist,
        "timestamp": timestamp,
        "next_exp_id": next_exp_id,
        "best": best.to_dict() if best is not None else None,
        "statuses": [label.value for label in FailureLabel],
        "base_url": root,
        "record_url": record_url,
        "curl_example": curl_example,
        "progress": summary.short_text() if summary is not None else "",
        "trend": summary.trend if summary is not None else None,
        "guardrails_tripped": [t["message"] for t in ((summary.guardrails or {}).get("tripped", ()) if summary else ())],
        "alerts": [alert_line(alert) for alert in alerts],
    }
    text = source if source is not None else (project.prompt_template or default_prompt_template())
    try:
        return _compiled(text).render(context)
    except Exception as exc:  # a user's template: any failure is theirs to fix
        raise InvalidInput("prompt_template", f"fails to render: {type(exc).__name__}: {exc}") from None



def alert_line(alert: "Alert") -> str:
    """One alert as a line of the prompt: level, trial, step, time, title and text, each
    folded to one line and fence-safe (the renderer's rule), title and text truncated."""
    step = f" at step {alert.step}" if alert.step is not None else ""
    when = f" ({alert.created_at[:16].replace('T', ' ')} UTC)" if alert.created_at else ""
    text = f": {_inline(alert.text, 200)}" if alert.text.strip() else ""
    return (f"- ALERT ({alert.level}) from exp {_inline(alert.exp_id, 40)}{step}{when}: "
            f"**{_inline(alert.title, 120)}**{text}")
