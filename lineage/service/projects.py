"""ProjectUses: creating, changing and deleting projects, and the checks of their fields.

Owns: :func:`new_project` (a validated project), the field checks of a project
(title, metric name, best policy, prompt template via :mod:`lineage.agent.prompt`),
the project revision that ETags derive from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lineage.agent.prompt import check_prompt_template
from lineage.domain import LEASE_SETTING, BestPolicy, Project, check_lease, check_metric_name, validate_slug
from lineage.errors import InvalidInput
from lineage.noise import AUTO_SETTING, K_SETTING, SIGMA_SETTING, check_auto, check_k, check_sigma
from lineage.service.claims import DUPLICATE_SETTING, check_duplicate_mode
from lineage.store import Store

#: Fields a project update may change.
PROJECT_FIELDS = (
    "title",
    "metric_name",
    "lower_is_better",
    "best_policy",
    "prompt_template",
    LEASE_SETTING,
    DUPLICATE_SETTING,
    SIGMA_SETTING,
    K_SETTING,
    AUTO_SETTING,
)
#: The fields kept in ``project.settings``, each with its check (null: back to the default).
SETTING_CHECKS = {
    LEASE_SETTING: check_lease,
    DUPLICATE_SETTING: check_duplicate_mode,
    SIGMA_SETTING: check_sigma,
    K_SETTING: check_k,
    AUTO_SETTING: check_auto,
}
#: Longest project title (the column is 300 characters wide).
MAX_TITLE = 300


class Projects:
    """create_project, project, projects, update_project, project_revision, delete_project."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create_project(self, slug: str, **options: Any) -> Project:
        """Create a project; ``options`` are :func:`new_project`'s."""
        with self.store.write() as conn:
            return self.store.projects.insert_project(conn, new_project(slug, **options))

    def project(self, slug: str) -> Project:
        with self.store.read() as conn:
            return self.store.projects.project(conn, slug)

    def projects(self) -> list[Project]:
        with self.store.read() as conn:
            return self.store.projects.projects(conn)

    def update_project(self, slug: str, changes: Mapping[str, Any]) -> Project:
        unknown = set(changes) - set(PROJECT_FIELDS)
        if unknown:
            raise InvalidInput(sorted(unknown)[0], "is not a project field that can be changed")
        values = dict(changes)
        if "best_policy" in values:
            values["best_policy"] = _checked_policy(values["best_policy"])
        if "metric_name" in values:
            values["metric_name"] = _checked_metric_name(values["metric_name"])
        if values.get("prompt_template") is not None:
            values["prompt_template"] = check_prompt_template(values["prompt_template"])
        if "title" in values:
            values["title"] = _checked_title(values["title"])
        changed = {name: values.pop(name) for name in SETTING_CHECKS if name in values}
        with self.store.write() as conn:
            project = self.store.projects.project(conn, slug)
            if changed:  # kept in the settings; null: back to the default
                settings = {k: v for k, v in project.settings.items() if k not in changed}
                settings.update({k: SETTING_CHECKS[k](v) for k, v in changed.items() if v is not None})
                values["settings"] = settings
            return self.store.projects.update_project(conn, project, values)

    def project_revision(self, project_slug: str) -> int:
        """The project's revision (bumped by every write): what ETags derive from."""
        with self.store.read() as conn:
            return self.store.projects.project_revision(conn, project_slug)

    def delete_project(self, project_slug: str) -> None:
        """Delete a project with its trials, their telemetry and its idempotency keys."""
        with self.store.write() as conn:
            self.store.projects.delete_project(conn, self.store.projects.project(conn, project_slug))


def new_project(
    slug: str,
    *,
    title: str = "",
    metric_name: str = "core_metric",
    lower_is_better: bool = True,
    best_policy: BestPolicy | str = BestPolicy.KEPT,
    prompt_template: str | None = None,
    source_format: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Project:
    """A validated, not yet stored, project."""
    return Project(
        slug=validate_slug(slug),
        title=_checked_title(title or slug),
        metric_name=_checked_metric_name(metric_name),
        lower_is_better=bool(lower_is_better),
        best_policy=_checked_policy(best_policy),
        prompt_template=None if prompt_template is None else check_prompt_template(prompt_template),
        source_format=source_format,
        settings=_checked_settings(settings or {}),
    )


def _checked_policy(value: BestPolicy | str) -> BestPolicy:
    try:
        return BestPolicy(value)
    except ValueError:
        known = ", ".join(p.value for p in BestPolicy)
        raise InvalidInput("best_policy", f"unknown policy {value!r}; known: {known}") from None


def _checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings, with the ones the ledger reads checked (:data:`SETTING_CHECKS`)."""
    if not isinstance(settings, Mapping):
        raise InvalidInput("settings", "must be a JSON object")
    for name, check in SETTING_CHECKS.items():
        if settings.get(name) is not None:
            check(settings[name])
    return dict(settings)


def _checked_metric_name(value: str) -> str:
    return check_metric_name(value)


def _checked_title(title: str) -> str:
    if not isinstance(title, str) or len(title) > MAX_TITLE or "\x00" in title:
        raise InvalidInput("title", f"must be text of at most {MAX_TITLE} characters without NUL")
    return title
