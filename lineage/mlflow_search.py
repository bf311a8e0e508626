"""The subset of MLflow's search filters the ledger answers, for ``runs/search`` and
``experiments/search``: clauses ``field OP 'value'`` joined by ``AND``, where ``OP`` is
``=``, ``!=``, ``LIKE`` or ``ILIKE`` (``%`` any run of characters, ``_`` one character, as
in SQL) and ``field`` is ``tags.K``, ``params.K`` (runs) or an attribute: ``status``,
``run_name``, ``run_id``, ``user_id`` of a run, ``name`` of an experiment. Anything else is
MLflow's ``INVALID_PARAMETER_VALUE`` naming the clause (never a silently wider answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lineage.mlflow_checks import invalid

#: attributes a filter may name, per what is searched
RUN_ATTRIBUTES = {"status": "status", "run_name": "run_name", "run_id": "run_id", "user_id": "user_id"}
EXPERIMENT_ATTRIBUTES = {"name": "name"}


@dataclass(frozen=True, slots=True)
class Clause:
    """One ``field OP 'value'`` of a search filter."""

    kind: str  # tags, params, attributes
    key: str
    op: str  # =, !=, LIKE, ILIKE
    value: str

    def matches(self, found: object) -> bool:
        """Whether a field's value (None: the field is absent) passes the clause."""
        if self.op == "!=":
            return found is None or str(found) != self.value
        if found is None:
            return False
        if self.op == "=":
            return str(found) == self.value
        pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in self.value)
        return re.fullmatch(pattern, str(found), re.DOTALL | (re.IGNORECASE if self.op == "ILIKE" else 0)) is not None


_CLAUSE = re.compile(
    r"""\s*(?:(?P<kind>tags?|params?|attributes?|attr|run)\.)?(?P<key>`[^`]+`|"[^"]+"|[\w.]+)\s*"""
    r"""(?P<op>!=|=|(?i:i?like)\b)\s*(?P<value>'[^']*'|"[^"]*")\s*"""
)


def parse_filter(text: object, attributes: Mapping[str, str] = RUN_ATTRIBUTES) -> list[Clause]:
    """The clauses of a filter (module doc); ``attributes``: those the searched thing has."""
    if not isinstance(text, str):
        raise invalid("filter must be a string")
    clauses: list[Clause] = []
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE) if text.strip() else []:
        found = _CLAUSE.fullmatch(part)
        if found is None:
            raise invalid(
                f"filter clause {part!r} is not supported here: use tags.K, params.K or an attribute "
                f"({', '.join(attributes)}) with =, !=, LIKE or ILIKE and a quoted value, joined by AND"
            )
        kind = (found["kind"] or "attributes").rstrip("s")
        kind = {"tag": "tags", "param": "params"}.get(kind, "attributes")
        key = found["key"].strip('`"')
        if kind == "attributes":
            if key not in attributes:
                raise invalid(f"filter attribute {key!r} is not supported; use one of {', '.join(attributes)}")
            key = attributes[key]
        clauses.append(Clause(kind, key, found["op"].upper(), found["value"][1:-1]))
    return clauses


def _entry(entries: list[dict[str, Any]], key: str) -> object:
    return next((entry["value"] for entry in entries if entry["key"] == key), None)


def run_matches(clauses: list[Clause], run: Mapping[str, Any]) -> bool:
    """Whether an MLflow ``Run`` (info and data) passes every clause."""
    for clause in clauses:
        found = (
            run["info"].get(clause.key) if clause.kind == "attributes" else _entry(run["data"][clause.kind], clause.key)
        )
        if not clause.matches(found):
            return False
    return True


def experiment_matches(
    clauses: list[Clause], experiment: Mapping[str, Any], same_name: Callable[[str, str], bool] | None = None
) -> bool:
    """Whether an MLflow ``Experiment`` passes every clause (``params.K`` matches nothing).
    ``same_name(value, experiment_id)``: whether ``name = 'value'`` names this experiment
    although its stored name differs (the ledger's names map to slugs)."""
    for clause in clauses:
        if clause.kind == "attributes":
            found = experiment.get(clause.key)
            if clause.op == "=" and same_name is not None and same_name(clause.value, experiment["experiment_id"]):
                continue
        else:
            found = _entry(experiment["tags"], clause.key) if clause.kind == "tags" else None
        if not clause.matches(found):
            return False
    return True
