"""The OpenAPI document is the contract: schemathesis (``st run``, every check, the
stateful phase following the document's links) against a real ``lineage serve`` process,
on SQLite and PostgreSQL, anonymous and with an admin token. Zero failures.

Bounded (``MAX_EXAMPLES`` per operation and phase; fixed seed, so a failure reproduces
with the command the test prints). Webhook delivery is off: the generated hook URLs are
never called. With a token, the fuzzer's own token is protected from revoking itself
(``tests/api/contract_hooks.py``); a spare admin token is there for it to revoke. The
counts (operations, test cases, requests, failures) are printed per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineage.service import Ledger
from tests.servers import serving

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAX_EXAMPLES = 10
SEED = 20261125
FUZZER = "contract-fuzzer"


def _st() -> list[str]:
    return [sys.executable, "-c", "from schemathesis.cli import schemathesis; schemathesis()"]


@pytest.mark.parametrize("mode", ["anonymous", "token"])
def test_schemathesis_finds_nothing(
    mode: str, backend: str, ledger: Ledger, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCHEMATHESIS_HOOKS": "tests.api.contract_hooks"}
    if mode == "token":
        _record, secret = ledger.tokens.create_token(name=FUZZER, role="admin")
        ledger.tokens.create_token(name="contract-spare-admin", role="admin")
        headers = ["-H", f"Authorization: Bearer {secret}"]
        env["LINEAGE_CONTRACT_PROTECTED_TOKEN"] = FUZZER
    monkeypatch.setenv("LINEAGE_HOOK_DELIVERY", "off")
    # nothing is delivered, so any schema-valid target may be taken: a private one is refused
    # by a rule the schema cannot state, which the fuzzer counts as a valid request rejected
    monkeypatch.setenv("LINEAGE_HOOK_PRIVATE_TARGETS", "1")
    report, har = tmp_path / "report.json", tmp_path / "requests.har"
    with serving(tmp_path, "--db", db_url) as base:
        command = [
            *_st(),
            "--config-file",
            str(HERE / "schemathesis.toml"),
            "run",
            f"{base}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--request-timeout",
            "120",
            "--no-color",
            "--report",
            "json,har",
            "--report-json-path",
            str(report),
            "--report-har-path",
            str(har),
            *headers,
        ]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        if mode == "token":  # the fuzzer's token outlived the run
            assert any(t.name == FUZZER and t.active for t in ledger.tokens.list_tokens())
    summary = json.loads(report.read_text())
    requests = len(json.loads(har.read_text())["log"]["entries"])
    failures = sum(kind["count"] for kind in summary["failures"])
    counts = (
        f"schemathesis {summary['schemathesis_version']} {backend}/{mode}: "
        f"{summary['operations']['tested']}/{summary['operations']['total']} operations, "
        f"{summary['test_cases']['generated']} test cases, {requests} requests, {failures} failures, "
        f"{len(summary['errors'])} errors, phases "
        + ", ".join(f"{name}={phase['status']}" for name, phase in summary["phases"].items())
    )
    print(counts)
    assert failures == 0 and not summary["errors"] and done.returncode == 0, (
        f"{counts}\n{done.stdout[-20000:]}\n{done.stderr[-3000:]}"
    )
    assert summary["operations"]["tested"] == summary["operations"]["total"] >= 30, counts
    assert summary["phases"]["stateful"]["status"] == "success", counts


def _document(tmp_path: Path, name: str) -> dict:
    from api.app import create_app
    from api.settings import Settings

    return create_app(Settings(database_url=str(tmp_path / name))).openapi()


def test_the_document_is_deterministic_and_every_error_is_a_problem(tmp_path: Path) -> None:
    """Two apps give the same bytes; every status >= 400 of every operation is
    problem+json with the Problem schema; the statuses follow from the routes."""
    first, second = _document(tmp_path, "a.db"), _document(tmp_path, "b.db")
    assert json.dumps(first, sort_keys=False) == json.dumps(second, sort_keys=False)
    operations = {f"{method.upper()} {path}": op for path, ops in first["paths"].items() for method, op in ops.items()}
    for name, operation in operations.items():
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert list(response["content"]) == ["application/problem+json"], (name, status)
                assert response["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"
                }, (name, status)
    statuses = {name: sorted(op["responses"]) for name, op in operations.items()}
    assert statuses["DELETE /api/v1/tokens/{name}"] == ["204", "401", "403", "404", "409", "422"]
    assert statuses["GET /api/v1/projects/{project}/trials/{exp_id}"] == ["200", "401", "404", "422"]
    assert statuses["POST /api/v1/projects"] == ["201", "400", "401", "403", "409", "413", "415", "422"]
    assert statuses["GET /api/v1/projects/{project}"] == ["200", "304", "401", "404", "422"]
    assert statuses["GET /api/v1/tokens"] == ["200", "401", "403"]
    assert "WWW-Authenticate" in operations["GET /api/v1/tokens"]["responses"]["401"]["headers"]
    assert "HTTPValidationError" not in first["components"]["schemas"]
    links = operations["POST /api/v1/projects/{project}/trials"]["responses"]["201"]["links"]
    assert links["GetTrial"]["parameters"]["exp_id"] == "$response.body#/trial/exp_id"


def test_request_schemas_carry_the_ledgers_rules(tmp_path: Path) -> None:
    """The document says what the server refuses: a few of the rules, read from it."""
    schemas = _document(tmp_path, "c.db")["components"]["schemas"]
    slug = schemas["ProjectCreate"]["properties"]["slug"]
    assert slug["minLength"] == 1 and slug["pattern"] == "^[a-z0-9._-]+$"
    trial = schemas["TrialCreate"]["properties"]
    assert trial["ig_clip_scale_frac_low"]["anyOf"][0] == {"type": "number", "minimum": 0.0, "maximum": 1.0}
    assert trial["expected_delta"]["anyOf"][0]["pattern"] == "^[^\\u0000]*$"
    assert schemas["TrialCreate"]["additionalProperties"] is False
    assert schemas["SimilarBody"]["properties"]["q"]["maxLength"] == 2000
    assert schemas["TokenCreate"]["properties"]["name"]["pattern"].startswith("^[a-zA-Z0-9")
