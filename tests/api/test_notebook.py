"""The project notebook on every face: notes citing trials (unknown ones refused, naming
them), carried by the prompt within its budget (best-cited first), and flagged when a
later kept trial contradicts them -- through the ledger, a real ``lineage serve``, the MCP
SDK's own client and ``lineage note``."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from api.cli import cli
from api.mcp_server import build_server
from lineage.errors import InvalidInput
from lineage.notebook import PROMPT_NOTE_CHARS, PROMPT_NOTES
from lineage.notebook.rules import MAX_NOTE_TEXT, negative_claims
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem


def _loop(ledger: Ledger) -> None:
    """000 baseline, 001 keep (MATRIX_LR 0.04 -> 0.05), 002 crash (MATRIX_LR 0.08), 003 discard (weight decay)."""
    ledger.projects.create_project("p", metric_name="val_bpb", lower_is_better=True)
    for status, metric, hypothesis in [
        ("baseline", 1.0, "baseline"),
        ("keep", 0.99, "increase MATRIX_LR from 0.04 to 0.05"),
        ("crash", None, "set MATRIX_LR to 0.08"),
        ("discard", 0.995, "add weight decay"),
    ]:
        ledger.recording.record_trial("p", {"status": status, "core_metric": metric, "hypothesis": hypothesis})


@pytest.fixture
def loop(ledger: Ledger) -> Ledger:
    """The ledger of the test's backend (SQLite, PostgreSQL) holding :func:`_loop`."""
    _loop(ledger)
    return ledger


def test_a_note_cites_trials_as_people_type_them(ledger: Ledger, loop: Ledger) -> None:
    note = ledger.notes.add_note(
        "p", {"text": "MATRIX_LR above 0.06 diverges", "cites": ["exp_002", "1"], "author": "a1"}
    )
    assert note.cites == (("002", "crash"), ("001", "keep")) and note.author == "a1" and note.contradicted is None
    assert [n.id for n in ledger.notes.notes("p")[0]] == [note.id]


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"text": "x", "cites": ["099", "exp_777", "001"]}, "cites", "099, exp_777"),
        ({"text": "x", "cites": []}, "cites", "at least one"),
        ({"text": "  ", "cites": ["001"]}, "text", "non-empty"),
        ({"text": "x" * (MAX_NOTE_TEXT + 1), "cites": ["001"]}, "text", "at most"),
        ({"text": "a\x00b", "cites": ["001"]}, "text", "control"),
        ({"text": "x", "cites": ["001"] * 21}, "cites", "at most 20"),
        ({"text": "x", "cites": ["001"], "colour": 1}, "colour", "not a field"),
    ],
)
def test_a_bad_note_names_its_field_and_stores_nothing(
    ledger: Ledger, loop: Ledger, fields: Any, field: str, said: str
) -> None:
    revision = ledger.projects.project_revision("p")
    with pytest.raises(InvalidInput) as bad:
        ledger.notes.add_note("p", fields)
    assert bad.value.field == field and said in bad.value.message
    assert ledger.notes.notes("p")[0] == [] and ledger.projects.project_revision("p") == revision


@pytest.mark.parametrize(
    ("text", "knob", "bound"),
    [
        ("LR above 0.06 diverges at depth >= 12", "lr", (True, 0.06)),
        ("weight decay never helps here", "wd", (None, None)),
        ("Don't raise the batch size.", "bs", (None, None)),
        ("MATRIX_LR > 0.08 hurts", "matrix lr", (True, 0.08)),
        ("avoid warmup", "warmup", (None, None)),
        ("LR below 1e-4 never works", "lr", (False, 0.0001)),
        ("we found that muon momentum doesn't help", "muon momentum", (None, None)),
    ],
)
def test_negative_claims_name_their_knob_and_bound(text: str, knob: str, bound: tuple[Any, Any]) -> None:
    (claim,) = negative_claims(text)
    assert (claim.knob, (claim.above, claim.value)) == (knob, bound)


def test_positive_notes_claim_nothing() -> None:
    assert negative_claims("Higher lr helps a lot at depth 8") == []
    assert negative_claims("qk norm with lr 0.05 is the best so far") == []


def test_a_later_keep_that_changed_the_knob_flags_the_note(ledger: Ledger, loop: Ledger) -> None:
    bounded = ledger.notes.add_note("p", {"text": "MATRIX_LR above 0.06 diverges", "cites": ["002"]})
    never = ledger.notes.add_note("p", {"text": "weight decay never helps", "cites": ["003"]})
    inside = ledger.notes.add_note("p", {"text": "MATRIX_LR below 0.03 hurts", "cites": ["001"]})
    # a keep at 0.05 is outside "above 0.06" and outside "below 0.03": no flag yet
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.985, "hypothesis": "set MATRIX_LR to 0.05"})
    assert all(n.contradicted is None for n in ledger.notes.notes("p")[0])
    # a discard never contradicts; a keep inside the bound does
    ledger.recording.record_trial(
        "p", {"status": "discard", "core_metric": 0.99, "hypothesis": "set MATRIX_LR to 0.09"}
    )
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.98, "hypothesis": "set MATRIX_LR to 0.07"})
    ledger.recording.record_trial(
        "p", {"status": "keep", "core_metric": 0.97, "hypothesis": "add weight decay 0.05 with warmup"}
    )
    flags = {n.id: n.contradicted for n in ledger.notes.notes("p")[0]}
    assert flags[bounded.id] is not None and flags[bounded.id].exp_id == "006" and flags[bounded.id].value == "0.07"
    assert flags[never.id] is not None and flags[never.id].exp_id == "007"  # by the words "weight decay"
    assert flags[inside.id] is None
    # the flag shows in the prompt
    prompt = ledger.agent.prompt_document("p", face="mcp")[1]
    line = next(x for x in prompt.splitlines() if x.startswith(f"- note {bounded.id}:"))
    assert "**CONTRADICTED**" in line and "exp_006" in line


def test_the_prompt_carries_the_best_cited_notes_first_within_its_budget(ledger: Ledger, loop: Ledger) -> None:
    assert "## Notebook" not in ledger.agent.prompt_document("p")[1]
    old_best = ledger.notes.add_note("p", {"text": "the best came from the matrix lr", "cites": ["001"]})
    for i in range(PROMPT_NOTES + 2):
        ledger.notes.add_note("p", {"text": f"crash note {i} " + "z" * 500, "cites": ["002"]})
    kept = ledger.notes.add_note("p", {"text": "a kept trial's note", "cites": ["000"]})
    prompt = ledger.agent.prompt_document("p", face="http", base_url="http://x")[1]
    section = prompt.split("## Notebook", 1)[1].split("\n## ", 1)[0]
    lines = [x for x in section.splitlines() if x.startswith("- note ")]
    assert len(lines) == PROMPT_NOTES and f"of {PROMPT_NOTES + 4} notes" in section
    # 001 is the best (baseline 000 is kept too): the best-cited note first, then the kept one, then the newest
    assert lines[0].startswith(f"- note {old_best.id}:") and "exp 001 (best)" in lines[0]
    assert lines[1].startswith(f"- note {kept.id}:")
    assert lines[2].startswith(f"- note {kept.id - 1}:")
    assert all(len(x) < PROMPT_NOTE_CHARS + 200 for x in lines)
    assert "POST http://x/api/v1/projects/p/notes" in section


def test_notes_over_http_from_a_real_server(serve, loop: Ledger, db_url: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(db_url)
    url = f"{server.url}{API}/projects/p/notes"
    with httpx.Client(timeout=30) as http:
        made = http.post(url, json={"text": "weight decay never helps", "cites": ["exp_003"], "author": "agent"})
        assert made.status_code == 201, made.text
        assert made.json()["cites"] == [{"exp_id": "003", "status": "discard"}]
        body = assert_problem(http.post(url, json={"text": "x", "cites": ["003", "exp_404", "405"]}), 422, "cites")
        assert "exp_404, 405" in body["detail"]
        assert_problem(http.post(url, json={"text": "x" * (MAX_NOTE_TEXT + 1), "cites": ["003"]}), 422)
        http.post(
            f"{server.url}{API}/projects/p/trials",
            json={"status": "keep", "core_metric": 0.9, "hypothesis": "weight decay 0.1"},
        )
        listed = http.get(url).json()
        assert len(listed["items"]) == 1 and listed["next_before_id"] is None
        assert listed["items"][0]["contradicted"]["exp_id"] == "004"
        prompt = http.get(f"{server.url}{API}/projects/p/prompt").text
        assert "weight decay never helps" in prompt and "**CONTRADICTED**" in prompt


def test_notes_over_mcp_with_the_sdk_client(ledger: Ledger, loop: Ledger) -> None:
    async def calls() -> Any:
        async with Client(build_server(ledger)) as client:
            made = await client.call_tool("add_note", {"project": "p", "text": "avoid warmup", "cites": ["1", "2"]})
            bad = await client.call_tool("add_note", {"project": "p", "text": "x", "cites": ["404"]})
            listed = await client.call_tool("list_notes", {"project": "p"})
            return made, bad, listed

    made, bad, listed = anyio.run(calls)
    assert not made.is_error and made.structured_content["cites"][0] == {"exp_id": "001", "status": "keep"}
    text = bad.content[0].text
    error = json.loads(text[text.index("{") :])
    assert bad.is_error and error["field"] == "cites" and "404" in error["detail"]
    assert [n["text"] for n in listed.structured_content["items"]] == ["avoid warmup"]


def test_notes_over_the_cli(ledger: Ledger, loop: Ledger, db_url: str) -> None:
    db = db_url
    runner = CliRunner()
    added = runner.invoke(
        cli, ["--db", db, "note", "add", "-p", "p", "--cite", "exp_001,2", "MATRIX_LR above 0.06 hurts"]
    )
    assert added.exit_code == 0 and "citing exp_001, exp_002" in added.output
    bad = runner.invoke(cli, ["--db", db, "note", "add", "-p", "p", "--cite", "404", "x"])
    assert bad.exit_code != 0 and bad.stderr.strip().count("\n") == 0 and "404" in bad.stderr
    listed = runner.invoke(cli, ["--db", db, "note", "list", "-p", "p", "--format", "json"])
    items = json.loads(listed.output)["items"]
    assert [n["text"] for n in items] == ["MATRIX_LR above 0.06 hurts"]
