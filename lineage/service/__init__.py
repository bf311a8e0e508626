"""The use-cases every face calls, assembled into one :class:`Ledger`.

A face (HTTP, MCP, CLI, pages) holds one ``Ledger`` and calls one of its parts, one per
user's path; each part is a plain object that gets what it uses (the store, another
part) in its constructor, so every call can be followed from the face to the SQL:

==================  =============================================  ==========================================
``ledger.``         class (module)                                 methods
==================  =============================================  ==========================================
``projects``        Projects (:mod:`lineage.service.projects`)     create/update/delete project, project(s), project_revision
``trials``          Trials (:mod:`lineage.service.core`)           best, chain, trial, find_trial, children, list_trials
``recording``       Recording (:mod:`lineage.service.recorder`)    record_trial, update_trial, record_trials, record_group
``tables``          Tables (:mod:`lineage.service.tables`)         import_trials, stream_trials, trials_page/query, dataframe, backup
``files``           Files (:mod:`lineage.loops.importing`)         import_file, import_results, export_results, results layout, loop reads
``exports``         Exports (:mod:`lineage.loops.exporting`)       export (csv, parquet, the project's results file; a view or all)
``agent``           Agent (:mod:`lineage.agent.uses`)              prompt, knowledge, find_similar, summary, guardrails, hooks
``browse``          Browse (:mod:`lineage.browse.uses`)            overview(s), dashboard, trial_context, tree_window, explore, knobs
``telemetry``       Telemetry (:mod:`lineage.telemetry`)           ingest_telemetry, telemetry_series/points, summarize_telemetry
``tokens``          Tokens (:mod:`lineage.auth`)                   create/list/revoke/verify tokens, principal, anonymous access
``alerts``          Alerts (:mod:`lineage.alerts`)                 record_alert, alerts, alerts_page
``leases``          Leases (:mod:`lineage.leases`)                 heartbeat, running, settle, sweep (running trials)
``claims``          Claims (:mod:`lineage.service.claims`)         claim (an idea, with its near-duplicates), frontier
``knobs``           Knobs (:mod:`lineage.service.knobs`)           history, same_knob_of_text (knob changes of trials)
``notes``           Notes (:mod:`lineage.notebook`)                add_note, notes (the project notebook)
==================  =============================================  ==========================================

The SQL under every part is ``ledger.store`` (:mod:`lineage.store`). A wing never imports
this package at run time (it assembles the wings, not the other way round).
"""

from __future__ import annotations

from sqlalchemy import Engine

from lineage import migrate
from lineage.agent.prompt import check_prompt_template, default_prompt_template, wrap_prompt
from lineage.agent.uses import Agent, KnowledgeData
from lineage.alerts import Alerts
from lineage.auth import Tokens
from lineage.browse.models import parse_expected_delta
from lineage.browse.uses import Browse
from lineage.chain import find_cycle, walk_chain
from lineage.db import make_engine
from lineage.domain import ImportReport, RecordResult
from lineage.leases import Leases
from lineage.loops.exporting import Exports
from lineage.loops.importing import Files
from lineage.notebook import Notes
from lineage.service.batch import BatchResult
from lineage.service.claims import Claim, Claims, Frontier
from lineage.service.core import Trials
from lineage.service.group_commit import RecordRequest
from lineage.service.knobs import Knobs
from lineage.service.projects import Projects, new_project
from lineage.service.recorder import Recording
from lineage.service.tables import TRIAL_SORTS, Tables, TrialsPage, TrialsQuery, decode_cursor, encode_cursor
from lineage.store import Store
from lineage.telemetry import Telemetry

__all__ = [
    "BatchResult",
    "Claim",
    "Frontier",
    "ImportReport",
    "KnowledgeData",
    "Ledger",
    "RecordRequest",
    "RecordResult",
    "TRIAL_SORTS",
    "TrialsPage",
    "TrialsQuery",
    "check_prompt_template",
    "decode_cursor",
    "default_prompt_template",
    "encode_cursor",
    "find_cycle",
    "new_project",
    "parse_expected_delta",
    "walk_chain",
    "wrap_prompt",
]


class Ledger:
    """The ledger on one database: one part per user's path (see the module docstring).
    Stateless beyond its engine: safe to run many of, in many processes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = store = Store(engine)
        self.projects = Projects(store)
        self.trials = Trials(store)
        self.recording = Recording(store)
        self.tables = Tables(store)
        self.files = Files(store, self.tables)
        self.exports = Exports(store, self.tables)
        self.knobs = Knobs(store)
        self.agent = Agent(store, self.knobs)
        self.browse = Browse(store)
        self.telemetry = Telemetry(store, self.recording)
        self.tokens = Tokens(store)
        self.alerts = Alerts(store)
        self.leases = Leases(store)
        self.claims = Claims(store, self.recording)
        self.notes = Notes(store)

    @classmethod
    def open(cls, db: str | None = None, *, upgrade: bool = True, wal_autocheckpoint: int | None = None) -> Ledger:
        """Open ``db`` (path or URL; default ./lineage.db) and bring its schema to head.
        ``wal_autocheckpoint``: SQLite only (``lineage.db.make_engine``)."""
        engine = make_engine(db, wal_autocheckpoint=wal_autocheckpoint)
        if upgrade:
            migrate.upgrade(engine)
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()
