"""The use-cases every face calls, assembled into one :class:`Ledger`.

A face (HTTP, MCP, CLI, pages) holds one ``Ledger`` and calls its methods. The methods
live with the path of the user they serve, one mixin per job; a method's home follows
from its name:

==================  ==========================================  =====================================
mixin               module                                      methods
==================  ==========================================  =====================================
LedgerCore          :mod:`lineage.service.core`                 open, close, best, chain, trial, children, list_trials
ProjectUses         :mod:`lineage.service.projects`             create/update/delete project, project(s), project_revision
RecordingUses       :mod:`lineage.service.recording`            record_trial, update_trial
BatchUses           :mod:`lineage.service.batch`                record_trials (a JSON batch, all or nothing)
GroupCommitUses     :mod:`lineage.service.group_commit`         record_group (single records sharing a commit)
TableUses           :mod:`lineage.service.tables`               import_trials, stream_trials, trials_page/query, dataframe, backup
FileUses            :mod:`lineage.loops.importing`              import_file, import_results, export_results, results layout
AgentUses           :mod:`lineage.agent.uses`                   prompt, knowledge, find_similar, summary, guardrails, hooks
BrowseUses          :mod:`lineage.browse.uses`                  overview(s), dashboard, trial_context, calibration
TreeUses            :mod:`lineage.browse.tree`                  tree_window
ExploreUses         :mod:`lineage.browse.explore`               explore
ColumnUses          :mod:`lineage.browse.columns`               project_columns
KnobUses            :mod:`lineage.browse.knobs`                 knobs
TelemetryUses       :mod:`lineage.telemetry`                    ingest_telemetry, telemetry_series/points, shared_telemetry, summarize_telemetry
TokenUses           :mod:`lineage.auth`                         create/list/revoke/verify tokens, tokens_exist
AlertUses           :mod:`lineage.alerts`                       record_alert, alerts, alerts_page
==================  ==========================================  =====================================

A wing never imports this package (it assembles the wings, not the other way round).
"""

from __future__ import annotations

from lineage.agent.prompt import check_prompt_template, default_prompt_template, wrap_prompt
from lineage.agent.uses import AgentUses, KnowledgeData
from lineage.alerts import AlertUses
from lineage.auth import TokenUses
from lineage.browse.columns import ColumnUses
from lineage.browse.explore import ExploreUses
from lineage.browse.knobs import KnobUses
from lineage.browse.models import parse_expected_delta
from lineage.browse.tree import TreeUses
from lineage.browse.uses import BrowseUses
from lineage.chain import find_cycle, walk_chain
from lineage.domain import ImportReport, RecordResult
from lineage.loops.importing import FileUses
from lineage.service.batch import BatchResult, BatchUses
from lineage.service.core import LedgerCore
from lineage.service.group_commit import GroupCommitUses, RecordRequest
from lineage.service.projects import ProjectUses, new_project
from lineage.service.recording import RecordingUses
from lineage.service.tables import TRIAL_SORTS, TableUses, TrialsPage, TrialsQuery, decode_cursor, encode_cursor
from lineage.telemetry import TelemetryUses

__all__ = [
    "BatchResult",
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


class Ledger(
    LedgerCore,
    ProjectUses,
    BatchUses,
    GroupCommitUses,
    RecordingUses,
    TableUses,
    FileUses,
    TelemetryUses,
    AgentUses,
    BrowseUses,
    TreeUses,
    ExploreUses,
    TokenUses,
    AlertUses,
    ColumnUses,
    KnobUses,
):
    """The ledger on one database: every use-case, by mixin (see the module docstring).
    Stateless beyond its engine: safe to run many of, in many processes."""
