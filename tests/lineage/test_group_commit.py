"""``Ledger.record_group`` on SQLite and PostgreSQL: single records sharing one commit
are told exactly what the same records made one after the other are told, and a bad
item fails alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from lineage.domain import trial_from_mapping
from lineage.errors import Conflict, InvalidInput, LedgerError
from lineage.service import Ledger, RecordRequest
from lineage.service.group_commit import MAX_GROUP
from lineage.service.group_reads import GroupReads

#: Server-made values that differ between two recordings of the same trials.
CLOCK_FIELDS = ("created_at", "updated_at", "timestamp")


def _requests() -> list[RecordRequest]:
    """A mix: allocated ids, a chosen id, a key used twice, a replay of a stored id, a
    conflict, bad fields, a parent that is not a trial, crashes, roots, similar texts."""
    same = {"status": "discard", "core_metric": 0.97, "hypothesis": "warmup schedule longer for adam"}
    return [
        RecordRequest(
            {"status": "keep", "core_metric": 0.9, "hypothesis": "cosine learning rate decay with warmup"},
            similar_prior=True,
        ),
        RecordRequest({"status": "sideways"}),  # bad status
        RecordRequest(same, "key-1", similar_prior=True),
        RecordRequest(same, "key-1", similar_prior=True),  # the same key again: replay
        RecordRequest({**same, "core_metric": 0.5}, "key-1"),  # the key, another body
        RecordRequest({"exp_id": "100", "status": "keep", "core_metric": 0.8, "hypothesis": "wider mlp"}),
        RecordRequest({"exp_id": "100", "status": "keep", "core_metric": 0.8, "hypothesis": "wider mlp"}),  # replay
        RecordRequest({"exp_id": "100", "status": "keep", "core_metric": 0.7}),  # conflict
        RecordRequest({"status": "keep", "core_metric": 0.6, "parent_exp": "999"}),  # no such parent
        RecordRequest(
            {"status": "crash", "core_metric": 0, "hypothesis": "cosine decay warmup learning rate"}, similar_prior=True
        ),
        RecordRequest({"status": "crash", "hypothesis": "fp8 matmuls"}),
        RecordRequest({"status": "keep", "core_metric": 0.85, "parent_exp": "", "hypothesis": "a new root"}),
        RecordRequest(
            {"status": "discard", "core_metric": 0.95, "hypothesis": "learning rate warmup cosine"}, similar_prior=True
        ),
    ]


def _told(outcome: Any) -> Any:
    """What a writer is told, less the clock (and the project's name)."""
    if isinstance(outcome, LedgerError):
        said = str(outcome).replace("'grouped'", "'single'")
        return (type(outcome).__name__, getattr(outcome, "field", None), said)
    told = outcome.to_dict()
    for name in CLOCK_FIELDS:
        told["trial"].pop(name, None)
    return told


def stored_rows(ledger: Ledger, slug: str) -> list[dict[str, Any]]:
    """The project's trials as dicts, less the clock (what two recordings must agree on)."""
    rows = [trial.to_dict() for trial in ledger.trials.list_trials(slug)]
    for row in rows:
        for name in CLOCK_FIELDS:
            row.pop(name, None)
    return rows


def _one_by_one(ledger: Ledger, slug: str, requests: list[RecordRequest]) -> list[Any]:
    out: list[Any] = []
    for request in requests:
        try:
            out.append(
                ledger.recording.record_trial(
                    slug, request.fields, idempotency_key=request.idempotency_key, similar_prior=request.similar_prior
                )
            )
        except LedgerError as error:
            out.append(error)
    return out


def _exp_ids(body: Any) -> list[str]:
    """The exp_ids an event's body names (where it names them), in order."""
    if isinstance(body, dict):
        found = [body["exp_id"]] if isinstance(body.get("exp_id"), str) else []
        return found + [e for key, value in sorted(body.items()) if key != "exp_id" for e in _exp_ids(value)]
    if isinstance(body, list):
        return [e for value in body for e in _exp_ids(value)]
    return []


def _two_projects(ledger: Ledger, **options: Any) -> None:
    for slug in ("grouped", "single"):
        ledger.projects.create_project(slug, lower_is_better=True, **options)
        ledger.recording.record_trial(slug, {"status": "baseline", "core_metric": 1.0, "hypothesis": "the baseline"})


def test_a_group_tells_each_writer_what_one_record_after_another_would(ledger: Ledger) -> None:
    _two_projects(ledger)
    requests = _requests()
    grouped = ledger.recording.record_group("grouped", requests)
    single = _one_by_one(ledger, "single", requests)
    assert [_told(o) for o in grouped] == [_told(o) for o in single]
    assert stored_rows(ledger, "grouped") == stored_rows(ledger, "single")
    # what the mix holds, so the comparison means something
    kinds = [type(o).__name__ for o in grouped]
    assert kinds.count("InvalidInput") == 2 and kinds.count("Conflict") == 2
    assert [o.created for o in grouped if not isinstance(o, LedgerError)] == [
        True,
        True,
        False,
        True,
        False,
        True,
        True,
        True,
        True,
    ]
    assert any(o.similar_prior for o in grouped if not isinstance(o, LedgerError))
    # the counters moved by what was stored: the next id follows on
    after = ledger.recording.record_trial("grouped", {"status": "discard", "core_metric": 0.99})
    assert (
        after.trial.exp_id
        == ledger.recording.record_trial("single", {"status": "discard", "core_metric": 0.99}).trial.exp_id
    )
    assert ledger.projects.project("grouped").trial_count == ledger.projects.project("single").trial_count == 9


def test_a_bad_item_fails_alone_and_leaves_nothing_of_itself(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    outcomes = ledger.recording.record_group(
        "p",
        [
            RecordRequest({"status": "keep", "core_metric": 0.9}),
            RecordRequest({"status": "keep", "core_metric": 0.5, "parent_exp": "404", "hypothesis": "orphan"}),
            RecordRequest({"status": "keep", "core_metric": 0.8}),
        ],
    )
    assert isinstance(outcomes[1], InvalidInput) and outcomes[1].field == "parent_exp"
    assert [o.trial.exp_id for o in (outcomes[0], outcomes[2])] == ["000", "001"]
    assert outcomes[2].trial.parent_exp == "000" and outcomes[2].is_new_best
    assert [t.exp_id for t in ledger.trials.list_trials("p")] == ["000", "001"]
    assert ledger.agent.find_similar("p", "orphan") == []


def test_webhook_events_and_guardrail_trips_are_those_of_single_records(
    ledger: Ledger, engine, private_hook_targets: None
) -> None:  # type: ignore[no-untyped-def]
    _two_projects(ledger)
    for slug in ("grouped", "single"):
        ledger.agent.add_hook(
            slug, "http://127.0.0.1:9/hook", events=["new_best", "trial_crashed", "guardrail_tripped"]
        )
        ledger.agent.set_guardrails(slug, {"max_crash_streak": 2, "max_trials_without_improvement": 3})
    requests = [
        RecordRequest(fields)
        for fields in (
            {"status": "keep", "core_metric": 0.9},
            {"status": "crash"},
            {"status": "crash"},
            {"status": "crash"},
            {"status": "discard", "core_metric": 0.95},
            {"status": "keep", "core_metric": 0.8},
        )
    ]
    ledger.recording.record_group("grouped", requests)
    _one_by_one(ledger, "single", requests)

    def events(slug: str) -> list[tuple[str, Any]]:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT d.event_type, d.body FROM hook_deliveries d JOIN projects p "
                    "ON p.id = d.project_id WHERE p.slug = :slug ORDER BY d.id"
                ),
                {"slug": slug},
            )
            return [(event, _exp_ids(json.loads(body))) for event, body in rows]

    assert events("grouped") == events("single")
    assert {event for event, _ in events("grouped")} >= {"new_best", "trial_crashed", "guardrail_tripped"}
    assert (
        ledger.agent.summary("grouped").to_dict()["guardrails"]
        == ledger.agent.summary("single").to_dict()["guardrails"]
    )


def test_a_database_error_records_each_item_alone(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error that is not the ledger's (here: the database refusing one insert) rolls the
    group back; each item is then recorded on its own, so only the one it hits fails."""
    ledger.projects.create_project("p", lower_is_better=True)
    insert = ledger.store.trials.insert_trial

    def failing(conn, project, trial, **kwargs):  # type: ignore[no-untyped-def]
        if trial.hypothesis == "poison":
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))
        return insert(conn, project, trial, **kwargs)

    monkeypatch.setattr(ledger.store.trials, "insert_trial", failing)
    requests = [
        RecordRequest({"status": "keep", "core_metric": 0.9, "hypothesis": "fine"}),
        RecordRequest({"status": "keep", "core_metric": 0.8, "hypothesis": "poison"}),
        RecordRequest({"status": "keep", "core_metric": 0.7, "hypothesis": "also fine"}),
    ]
    with pytest.raises(OperationalError):  # alone, the database's error reaches its writer
        ledger.recording.record_group("p", requests[1:2])
    outcomes = ledger.recording.record_group("p", requests)
    assert isinstance(outcomes[1], OperationalError)
    assert [o.trial.exp_id for o in (outcomes[0], outcomes[2])] == ["000", "001"]
    assert [t.hypothesis for t in ledger.trials.list_trials("p")] == ["fine", "also fine"]


def test_a_missing_project_is_told_to_every_item_and_groups_are_bounded(ledger: Ledger) -> None:
    outcomes = ledger.recording.record_group("nowhere", [RecordRequest({"status": "keep"})] * 3)
    assert all(o.field == "project" for o in outcomes)
    with pytest.raises(ValueError):
        ledger.recording.record_group("nowhere", [RecordRequest({"status": "keep"})] * (MAX_GROUP + 1))
    assert issubclass(Conflict, LedgerError)


def test_a_group_adds_its_words_to_the_vocabulary_and_finds_by_prefix(ledger: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_group(
        "p",
        [
            RecordRequest(
                {"status": "keep", "core_metric": 0.9, "hypothesis": f"zygomorphic{i} attention sinks"},
                similar_prior=True,
            )
            for i in range(3)
        ],
    )
    with engine.connect() as conn:
        words = set(conn.execute(text("SELECT term FROM trial_search_terms WHERE term LIKE 'zygomorphic%'")).scalars())
    assert words == {"zygomorphic0", "zygomorphic1", "zygomorphic2"}
    assert {s.exp_id for s in ledger.agent.find_similar("p", "zygomorph")} == {"000", "001", "002"}


def test_anonymous_items_are_recorded_only_while_the_ledger_takes_anonymous_writes(ledger: Ledger) -> None:
    """The group reads the access state in its own transaction: anonymous items are
    refused as a write without a token is (before the project is looked up), the
    others are recorded, and an explicit reopening lets them in again."""
    ledger.projects.create_project("p", lower_is_better=True)
    anonymous = RecordRequest({"status": "keep", "core_metric": 0.9}, anonymous=True)
    signed = RecordRequest({"status": "keep", "core_metric": 0.8})
    assert all(o.created for o in ledger.recording.record_group("p", [anonymous, signed]))  # no token yet: open

    ledger.tokens.create_token(name="agent", role="writer")  # the first token closes anonymous writes
    outcomes = ledger.recording.record_group("p", [anonymous, signed, anonymous])
    assert [type(o).__name__ for o in outcomes] == ["Unauthorized", "RecordResult", "Unauthorized"]
    assert "needs a token" in str(outcomes[0])
    assert [t.exp_id for t in ledger.trials.list_trials("p")] == ["000", "001", "002"]
    missing = ledger.recording.record_group("nowhere", [anonymous, signed])
    assert [type(o).__name__ for o in missing] == ["Unauthorized", "NotFound"]

    ledger.tokens.set_anonymous_writes("open", by="test")
    assert all(o.created for o in ledger.recording.record_group("p", [anonymous, anonymous]))
    assert len(ledger.trials.list_trials("p")) == 5


def _overlapping(count: int, seed: int) -> list[str]:
    """Texts from a small vocabulary, so shortlists fill up from recent trials and bands."""
    import random

    words = [
        "warmup",
        "cosine",
        "decay",
        "learning",
        "rate",
        "batch",
        "size",
        "clip",
        "gradient",
        "norm",
        "dropout",
        "residual",
        "attention",
        "heads",
        "wider",
        "mlp",
        "longer",
        "schedule",
    ]
    rng = random.Random(seed)
    return [" ".join(rng.sample(words, rng.randint(3, 7))) for _ in range(count)]


def test_groups_read_once_and_tell_what_one_by_one_would(ledger: Ledger, engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Groups of every size over a project past the shortlist's bounds (more stored trials
    than PRIOR_RECENT, several per band), with orphans stored under ids the groups will
    allocate, explicit parents (stored, orphaned and of the same group) and roots: every
    answer, similar_prior included, and every stored row (chain links too) are those of
    the same records made one by one; and what each item is given in place of its own
    reads is what those reads return at its turn."""
    original = GroupReads.new_trial
    given_reads: list[bool] = []  # (not an assert in there: a group that raises is redone item by item)

    def checked(self, store, conn, project, exp_id, parent_exp, prior_keys):  # type: ignore[no-untyped-def]
        given = original(self, store, conn, project, exp_id, parent_exp, prior_keys)
        given_reads.append(given == store.trials.new_trial_reads(conn, project, exp_id, parent_exp, prior_keys))
        return given

    monkeypatch.setattr(GroupReads, "new_trial", checked)
    stored = [
        {"exp_id": f"s{i}", "status": "discard", "core_metric": 2.0 + i, "hypothesis": text}
        for i, text in enumerate(_overlapping(25, seed=1))
    ]
    orphans = [
        {"exp_id": "o1", "parent_exp": "031", "status": "discard", "core_metric": 5.0, "hypothesis": "waits"},
        {"exp_id": "o2", "parent_exp": "o1", "status": "discard", "core_metric": 5.0, "hypothesis": "below"},
    ]
    for slug in ("grouped", "single"):
        ledger.projects.create_project(slug, lower_is_better=True)
        ledger.tables.import_trials(slug, iter([trial_from_mapping(row) for row in (*stored, *orphans)]))
    texts = iter(_overlapping(60, seed=2))
    sizes = [1, 2, 3, 4, 7, 12, 31]
    grouped_said, single_said = [], []
    for number, size in enumerate(sizes):
        requests = []
        for k in range(size):
            fields: dict[str, Any] = {
                "status": ("keep", "discard", "crash")[k % 3],
                "hypothesis": next(texts),
                "core_metric": round(1.5 - 0.01 * (number * 10 + k), 3),
            }
            if k % 5 == 1:
                fields["parent_exp"] = "s3"  # a stored parent
            elif k % 5 == 4:
                fields["parent_exp"] = "o2"  # an orphan, adopted on the way
            elif k % 5 == 2 and k > 2:
                fields["parent_exp"] = "" if k % 2 else None  # a root
            elif k % 7 == 3:
                fields["notes"] = "gradient clip norm"
            fields = {key: ("" if value is None else value) for key, value in fields.items()}
            requests.append(RecordRequest(fields, similar_prior=k % 4 != 3))
        grouped_said += [_told(o) for o in ledger.recording.record_group("grouped", requests)]
        single_said += [_told(o) for o in _one_by_one(ledger, "single", requests)]
    assert grouped_said == single_said
    if engine.dialect.name == "sqlite":  # SQLite's items read one by one (group_reads' doc)
        assert given_reads == []
    else:
        assert len(given_reads) >= len(grouped_said) - 3 and all(given_reads)
    assert stored_rows(ledger, "grouped") == stored_rows(ledger, "single")
    with engine.connect() as conn:
        links = {
            slug: conn.execute(
                text(
                    "SELECT t.exp_id, t.chain_depth, t.chain_skip FROM trials t JOIN projects p ON p.id = t.project_id "
                    "WHERE p.slug = :slug ORDER BY t.seq"
                ),
                {"slug": slug},
            ).all()
            for slug in ("grouped", "single")
        }
    assert links["grouped"] == links["single"]
    assert {row[1] for row in links["grouped"]} - {0, 1, 2}  # chains deeper than a step
    # what the comparison covered: similar_prior answers, an orphan adopted by an allocated id
    told = [said for said in grouped_said if isinstance(said, dict)]
    assert sum(1 for said in told if said.get("similar_prior")) > 20
    assert ledger.trials.chain("grouped", "o2")[-3:][0].exp_id == "031"
