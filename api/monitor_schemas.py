"""Request and response schemas of the loop's health: the progress summary, guardrails and
webhooks (the rules are :mod:`lineage.monitor`'s; the routes are :mod:`api.routes.agent`'s).
The rest of the API's schemas are :mod:`api.schemas`'."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from api.schema_types import TEXT_CHECKS
from api.schemas import Strict
from api.trial_schemas import NoiseFloorOut
from lineage.monitor.hooks import MAX_URL, URL_PATTERN

HookUrl = Annotated[str, Field(max_length=MAX_URL, pattern=URL_PATTERN), *TEXT_CHECKS]


class ProgressQuery(Strict):
    last: int = Field(20, ge=1, le=100_000, description="Window of the recent keep rate and of the trend rule")


class TrialBrief(BaseModel):
    exp_id: str
    status: str
    core_metric: float | None
    seq: int | None
    specialist: str


class BestBrief(TrialBrief):
    reached_at: str | None = Field(description="The best trial's timestamp, else when it was recorded")
    reached_at_trial: int = Field(description="Its 1-based position in the project")


class GuardrailPolicyBody(Strict):
    """A project's guardrails; a missing or null limit is off."""

    max_crash_streak: int | None = Field(None, ge=1, le=1_000_000, description="Trip after N consecutive crashes")
    max_trials_without_improvement: int | None = Field(
        None, ge=1, le=1_000_000, description="Trip after M trials without a new best"
    )
    budget_hours: float | None = Field(None, gt=0, le=1_000_000, description="Trip when sum(total_s) reaches H hours")


class GuardrailTrip(BaseModel):
    name: Literal["crash_streak", "no_improvement", "budget_hours"]
    value: float
    limit: float
    message: str
    since_exp_id: str | None
    since: str | None


class GuardrailsOut(BaseModel):
    policy: GuardrailPolicyBody
    tripped: list[GuardrailTrip]


class ProgressOut(BaseModel):
    """The progress summary; the figures and the trend rule are ``lineage.monitor.progress``'s."""

    project: str
    metric_name: str
    direction: Literal["lower", "higher"]
    revision: int
    trials: int
    by_status: dict[str, int]
    keep_rate: float | None
    last_n: int
    keep_rate_last_n: float | None
    baseline: TrialBrief | None
    best: BestBrief | None
    improvement_vs_baseline: float | None
    trials_since_improvement: int
    trials_since_improvement_above_noise: int | None = Field(
        None, description="Trials since the first one within k·σ of the best (the trend and guardrail count these)"
    )
    noise: NoiseFloorOut | None = None
    best_vs_noise: str | None = Field(None, description="The best's own gain against the noise floor, in words")
    improvement_per_10_trials: float | None
    crash_streak: int
    time_spent_s: float
    trend: Literal["improving", "plateauing", "stuck", "starting"]
    trend_rule: dict[str, Any]
    guardrails: GuardrailsOut | None


class HookCreate(Strict):
    url: HookUrl = Field(description="http:// or https:// URL receiving the events")
    events: list[Literal["new_best", "guardrail_tripped", "trial_crashed", "alert"]] | None = Field(
        None, min_length=1, description="Default: all"
    )
    format: Literal["json", "slack"] = "json"


class HookOut(BaseModel):
    id: int
    project: str
    url: str
    events: list[str]
    format: str
    created_at: str | None
    deliveries: dict[str, int]


class HookCreated(HookOut):
    secret: str = Field(description="Signs every delivery (HMAC-SHA256); shown only in this response")
