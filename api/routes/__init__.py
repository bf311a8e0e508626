"""The JSON API under ``/api/v1`` (plus ``/ready``): one router per resource, one module each.

Handlers stay a call or two long: the rules are the service's (``lineage.service``,
``lineage.auth``, ``lineage.telemetry``), responses are built by ``api.present``, and
errors become problem+json in ``api.problems``. Reads and small writes run inline in
``async def`` handlers (a thread-pool hop would cost about as much as the call); work
that grows with the input (file import, telemetry batches and series, summaries,
project deletion) runs in the thread pool, and while such a write is in flight the
small writes go there too (``api.deps.WriteLanes``: they may wait for its lock).

=============  =====================================================================
module         routes
=============  =====================================================================
``ops``        ``/ready``
``projects``   ``/projects``, ``/projects/{p}``
``trials``     ``/projects/{p}/trials...`` and the TSV table
``telemetry``  the trainer's: ``/projects/{p}/trials/{exp}/telemetry...``
``agent``      the agent's: prompt, knowledge, similar, summary, guardrails, hooks
``tokens``     ``/tokens``, ``/access``
``explore``    the researcher's explorer and knob view: ``/projects/{p}/explore``, ``/knobs``
``alerts``     alerts from training code: ``/projects/{p}/alerts``, ``.../trials/{exp}/alerts``
``claims``     parallel agents: ``/projects/{p}/claims``, ``/running``, ``/frontier``
``notes``      the project notebook: ``/projects/{p}/notes``
``mlflow``     MLflow's tracking API, ``/api/2.0/mlflow/...`` (not in the OpenAPI document)
=============  =====================================================================

``install_routes`` includes them in the order of ``ROUTERS``; the OpenAPI document lists
the paths in that order.

=======  ===============================================  ======  =========================
method   path (under ``/api/v1``)                         role    what
=======  ===============================================  ======  =========================
POST     /projects                                        writer  create a project
GET      /projects                                        reader  list projects
GET      /projects/{p}                                    reader  one project (ETag)
PATCH    /projects/{p}                                    writer  title, metric, direction,
                                                                  policy, prompt_template
DELETE   /projects/{p}                                    admin   delete with its trials
POST     /projects/{p}/trials                             writer  record (201/200/409)
POST     /projects/{p}/trials:batch                       writer  record up to 1,000, all or nothing (201/200/409)
GET      /projects/{p}/trials                             reader  filter, sort, cursor; TSV
GET      /projects/{p}/trials/{exp}                       reader  one trial
PATCH    /projects/{p}/trials/{exp}                       writer  status, metric, notes, ...
POST     /projects/{p}/trials/{exp}/heartbeat             writer  keep a running trial alive (409)
GET      /projects/{p}/trials/{exp}/lineage               reader  chain from the root
GET      /projects/{p}/trials.tsv                         reader  the whole table as TSV
POST     /projects/{p}/trials.tsv                         writer  atomic TSV import
POST     /projects/{p}/trials/{exp}/telemetry             writer  a batch of points
GET      /projects/{p}/trials/{exp}/telemetry             reader  series (min/max buckets)
POST     /projects/{p}/trials/{exp}/telemetry/summarize   writer  ig_clip_scale_* from it
GET      /projects/{p}/explore                            reader  curves of many trials, grouped
POST     /projects/{p}/trials/{exp}/alerts                writer  raise an alert (idempotent)
GET      /projects/{p}/trials/{exp}/alerts                reader  the trial's alerts
GET      /projects/{p}/alerts                             reader  the project's alerts
GET      /projects/{p}/prompt                             reader  agent prompt (ETag)
GET      /projects/{p}/knowledge                          reader  KNOWLEDGE.md / JSON (ETag)
GET      /projects/{p}/similar?q=TEXT                     reader  "was this tried?"
POST     /projects/{p}/similar                            reader  the same, q in a JSON body
GET      /projects/{p}/summary                            reader  progress, trend, guardrails
POST     /projects/{p}/claims                             writer  claim an idea (201/200/409)
GET      /projects/{p}/running                            reader  who is running what
GET      /projects/{p}/frontier                           reader  best, branch tip, running claims
POST     /projects/{p}/notes                              writer  add a note citing trials (201/422)
GET      /projects/{p}/notes                              reader  the notebook, newest first
GET      /projects/{p}/guardrails                         reader  policy and trips
PUT      /projects/{p}/guardrails                         writer  set the policy
GET      /projects/{p}/hooks                              admin   webhooks
POST     /projects/{p}/hooks                              admin   add (secret shown once)
DELETE   /projects/{p}/hooks/{id}                         admin   remove
GET      /tokens                                          admin   list tokens
POST     /tokens                                          admin   create (secret shown once)
DELETE   /tokens/{name}                                   admin   revoke (not the last admin)
GET      /access                                          admin   anonymous writes: state
PUT      /access                                          admin   open or close them
=======  ===============================================  ======  =========================
"""

from __future__ import annotations

from fastapi import FastAPI

from api.routes import agent, alerts, claims, explore, mlflow, notes, ops, projects, telemetry, tokens, trials
from api.routes.fast_record import FastRecordRoute

__all__ = ["install_routes"]

#: Inclusion order (the OpenAPI document's path order).
ROUTERS = (
    ops.router,
    projects.router,
    trials.router,
    telemetry.router,
    agent.router,
    tokens.router,
    tokens.access_router,
    explore.router,
    alerts.router,
    claims.router,
    notes.router,
    mlflow.router,
)


def install_routes(app: FastAPI) -> None:
    """Add every JSON API router to ``app``, and before them the common case of a single
    record (``api.routes.fast_record``: the same answers, without FastAPI's per-request
    machinery; the route and its document stay FastAPI's)."""
    for router in ROUTERS:
        app.include_router(router)
    app.router.routes.insert(0, FastRecordRoute())
