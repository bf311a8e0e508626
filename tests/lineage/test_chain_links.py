"""The stored chain links (``lineage.store.chain``: each trial's chain depth and skip
pointer) equal what walking the parent pointers gives, on SQLite and PostgreSQL, after
every write path: imports (parents before, after or outside the file, an import adopting
stored orphans), records (a new trial adopting stored ones), re-parenting updates and
migration 0010; and the pages' chain reads (``chain_slice``, ``chain_ends``,
``on_chain``) agree with the whole walk."""

from __future__ import annotations

import random
from datetime import UTC

import pytest

from lineage import migrate
from lineage.chain import chain_ends, chain_length, chain_slice, chain_to, on_chain, walk_chain
from lineage.db import make_engine
from lineage.domain import FailureLabel, Trial
from lineage.service import Ledger
from lineage.store.chain import CHAIN_SKIP


def expected_links(trials: list[Trial]) -> dict[str, tuple[int, str]]:
    """``(depth, skip)`` of every trial by walking its parents (``walk_chain``)."""
    by_id = {t.exp_id: t for t in trials}
    out = {}
    for trial in trials:
        chain = walk_chain(trial.exp_id, by_id)
        depth = len(chain)
        at = (depth - 1) // CHAIN_SKIP * CHAIN_SKIP
        out[trial.exp_id] = (depth, chain[at - 1].exp_id if at else "")
    return out


def stored_links(ledger: Ledger, slug: str) -> dict[str, tuple[int, str]]:
    with ledger.store.read() as conn:
        return ledger.store.chain.chain_links(conn, ledger.store.projects.project(conn, slug))


def assert_links(ledger: Ledger, slug: str) -> None:
    trials = list(ledger.tables.stream_trials(slug))
    assert stored_links(ledger, slug) == expected_links(trials)


def loop_trials(n: int, rng: random.Random, *, prefix: str = "", first_parent: str = "") -> list[Trial]:
    """A loop's trials: each a child of the best so far (keeps extend the chain), now and
    then a discard a child of an older trial; ids ``prefix + i``."""
    out: list[Trial] = []
    best = first_parent
    for i in range(n):
        exp_id = f"{prefix}{i}"
        keep = rng.random() < 0.4
        parent = best if keep or rng.random() < 0.9 or not out else rng.choice(out).exp_id
        out.append(
            Trial(
                exp_id=exp_id,
                parent_exp=parent if (out or first_parent) else "",
                status=FailureLabel.KEEP if keep else FailureLabel.DISCARD,
                core_metric=1.0 - i / 1e4,
            )
        )
        if keep:
            best = exp_id
    return out


def test_an_import_in_file_order_stores_the_walked_links(ledger: Ledger) -> None:
    trials = loop_trials(700, random.Random(1))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    assert_links(ledger, "p")
    assert max(d for d, _ in stored_links(ledger, "p").values()) > 3 * CHAIN_SKIP  # skips were used


def test_an_import_with_parents_later_in_the_file_or_missing(ledger: Ledger) -> None:
    rng = random.Random(2)
    trials = loop_trials(400, rng)
    shuffled = trials[:]
    rng.shuffle(shuffled)  # children before their parents
    shuffled.append(Trial(exp_id="orphan", parent_exp="not-here", status=FailureLabel.KEEP, core_metric=0.5))
    shuffled.append(Trial(exp_id="orphan-child", parent_exp="orphan", status=FailureLabel.KEEP, core_metric=0.4))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(shuffled))
    assert_links(ledger, "p")
    assert stored_links(ledger, "p")["orphan-child"] == (2, "")


def test_a_second_import_adopts_stored_orphans(ledger: Ledger) -> None:
    rng = random.Random(3)
    first = loop_trials(300, rng)
    # stored trials whose parents ("b5", "b250") come with the next import
    first.append(Trial(exp_id="late", parent_exp="b250", status=FailureLabel.KEEP, core_metric=0.1))
    first.append(Trial(exp_id="late2", parent_exp="late", status=FailureLabel.KEEP, core_metric=0.1))
    first.append(Trial(exp_id="early", parent_exp="b5", status=FailureLabel.KEEP, core_metric=0.1))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(first))
    assert_links(ledger, "p")
    second = loop_trials(260, rng, prefix="b", first_parent=first[299].exp_id)
    ledger.tables.import_trials("p", iter(second))
    assert_links(ledger, "p")
    assert stored_links(ledger, "p")["late2"][0] > 2


def test_records_and_a_record_that_adopts_stored_trials(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    ledger.tables.import_trials(
        "p",
        iter(
            [
                Trial(exp_id="kid", parent_exp="dad", status=FailureLabel.KEEP, core_metric=5.0),
                Trial(exp_id="grandkid", parent_exp="kid", status=FailureLabel.KEEP, core_metric=5.0),
            ]
        ),
    )
    ledger.recording.record_trial("p", {"exp_id": "root", "parent_exp": "", "status": "keep", "core_metric": 2.0})
    previous = "root"
    for i in range(2 * CHAIN_SKIP + 5):  # a parent left out is the current best: one long chain
        ledger.recording.record_trial("p", {"exp_id": f"r{i}", "status": "keep", "core_metric": 1.0 - i / 1e3})
        previous = f"r{i}"
    assert stored_links(ledger, "p")[previous][0] == 2 * CHAIN_SKIP + 6
    ledger.recording.record_trial(
        "p", {"exp_id": "dad", "parent_exp": previous, "status": "discard", "core_metric": 3.0}
    )
    assert_links(ledger, "p")
    assert stored_links(ledger, "p")["grandkid"][0] == 2 * CHAIN_SKIP + 9


def test_a_batch_record_with_parents_inside_the_batch(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    ledger.tables.import_trials(
        "p", iter([Trial(exp_id="orphan", parent_exp="b3", status=FailureLabel.KEEP, core_metric=9.0)])
    )
    items = [{"exp_id": "b0", "parent_exp": "", "status": "keep", "core_metric": 1.0}]
    items += [
        {"exp_id": f"b{i}", "parent_exp": f"b{i - 1}", "status": "keep", "core_metric": 1.0 - i / 1e3}
        for i in range(1, CHAIN_SKIP + 10)
    ]
    ledger.recording.record_trials("p", items)
    assert_links(ledger, "p")
    assert stored_links(ledger, "p")["orphan"] == (5, "")  # adopted when b3 came


def test_re_parenting_updates_the_whole_subtree(ledger: Ledger) -> None:
    trials = loop_trials(500, random.Random(4))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    rng = random.Random(5)
    for _ in range(6):
        mover = rng.choice(trials[1:]).exp_id
        below = {t.exp_id for t in trials if any(a.exp_id == mover for a in chain_of(ledger, t.exp_id))}
        target = rng.choice([t.exp_id for t in trials if t.exp_id not in below] + [""])
        ledger.recording.update_trial("p", mover, {"parent_exp": target})
        assert_links(ledger, "p")
    # an update that leaves the parent alone leaves the links alone
    before = stored_links(ledger, "p")
    ledger.recording.update_trial("p", trials[10].exp_id, {"notes": "looked at it again"})
    assert stored_links(ledger, "p") == before


def chain_of(ledger: Ledger, exp_id: str) -> list[Trial]:
    return ledger.trials.chain("p", exp_id)


def test_the_pages_chain_reads_agree_with_the_whole_walk(ledger: Ledger) -> None:
    trials = loop_trials(900, random.Random(6))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    best = ledger.trials.best("p")
    assert best is not None
    rng = random.Random(7)
    with ledger.store.read() as conn:
        store = ledger.store
        project = store.projects.project(conn, "p")
        whole = [t.exp_id for t in chain_to(store, conn, project, best.exp_id)]
        assert len(whole) > 3 * CHAIN_SKIP
        assert chain_length(store, conn, project, best.exp_id) == len(whole)
        for _ in range(40):
            start, count = rng.randrange(len(whole) + 3), rng.randrange(1, 300)
            got = [t.exp_id for t in chain_slice(store, conn, project, best.exp_id, start, count)]
            assert got == whole[start : start + count], (start, count)
        ends = chain_ends(store, conn, project, best.exp_id)
        assert [t.exp_id for t in ends.head] == whole[:5] and [t.exp_id for t in ends.tail] == whole[-15:]
        assert ends.length == len(whole) and ends.hidden == len(whole) - 20
        on = set(whole)
        for trial in rng.sample(trials, 120):
            assert on_chain(store, conn, project, trial.exp_id, best.exp_id) == (trial.exp_id in on)
        short = whole[7]
        assert [t.exp_id for t in chain_ends(store, conn, project, short).shown] == whole[:8]


def test_the_chain_page_comes_in_pages_that_add_up_to_the_chain(ledger: Ledger) -> None:
    trials = loop_trials(800, random.Random(8))
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    whole = [t.exp_id for t in ledger.trials.chain("p")]
    pages, offset = [], 0
    while True:
        page = ledger.browse.chain_page("p", offset=offset, limit=100)
        assert page.length == len(whole) and page.offset == offset
        pages += [t.exp_id for t in page.trials]
        offset += 100
        if offset >= page.length:
            break
    assert pages == whole
    mid = whole[150]
    to_mid = ledger.browse.chain_page("p", mid, offset=100, limit=100)
    assert [t.exp_id for t in to_mid.trials] == whole[100:151] and to_mid.target == mid


def _insert_old(engine, slug: str, rows: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    """Trial rows as schema 0009 holds them: ``(exp_id, parent_exp)``."""
    from datetime import datetime

    from sqlalchemy import text

    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = :s"), {"s": slug}).scalar_one()
        now = datetime.now(UTC)
        extra = "CAST('{}' AS json)" if engine.dialect.name == "postgresql" else "'{}'"
        conn.execute(
            text(
                "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, domain, "
                "hypothesis, expected_delta, status, core_metric, job_name, snapshot_path, notes, extra, created_at, "
                f"updated_at, exp_key) VALUES (:p, :seq, :e, '', '', :parent, '', '', '', '', 'keep', 1.0, '', '', '', "
                f"{extra}, :now, :now, '')"
            ),
            [{"p": project_id, "seq": i, "e": e, "parent": parent, "now": now} for i, (e, parent) in enumerate(rows)],
        )
        conn.execute(text("UPDATE projects SET next_seq = :n WHERE id = :p"), {"p": project_id, "n": len(rows)})


def test_revision_0010_fills_the_links_of_stored_trials(fresh_db_url: str) -> None:
    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0009")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    trials = loop_trials(400, random.Random(9))
    rows = [(t.exp_id, t.parent_exp) for t in trials] + [("x", "gone"), ("y", "x"), ("c1", "c2"), ("c2", "c1")]
    _insert_old(engine, "p", rows)
    migrate.upgrade(engine)
    links = stored_links(ledger, "p")
    want = expected_links([*trials, Trial(exp_id="x", parent_exp="gone"), Trial(exp_id="y", parent_exp="x")])
    assert {e: v for e, v in links.items() if e not in ("c1", "c2")} == want
    assert links["c1"] == links["c2"] == (0, "")  # a cycle older data held: unknown, and read by walking
    with ledger.store.read() as conn:
        project = ledger.store.projects.project(conn, "p")
        assert chain_length(ledger.store, conn, project, "c1") == 2
        assert [t.exp_id for t in chain_slice(ledger.store, conn, project, "c1", 0, 5)] == ["c2", "c1"]
    engine.dispose()


@pytest.mark.parametrize("n", [1, CHAIN_SKIP, CHAIN_SKIP + 1])
def test_skip_pointers_at_block_edges(ledger: Ledger, n: int) -> None:
    ledger.projects.create_project("p")
    trials = [
        Trial(exp_id=str(i), parent_exp=str(i - 1) if i else "", status=FailureLabel.KEEP, core_metric=1.0 - i / 1e4)
        for i in range(n + CHAIN_SKIP + 1)
    ]
    ledger.tables.import_trials("p", iter(trials))
    assert_links(ledger, "p")
    with ledger.store.read() as conn:
        project = ledger.store.projects.project(conn, "p")
        last = trials[-1].exp_id
        for depth in (1, n, n + 1, len(trials)):
            assert ledger.store.chain.ancestor_at(conn, project, last, depth) == trials[depth - 1].exp_id
        assert ledger.store.chain.ancestor_at(conn, project, last, len(trials) + 1) is None


def test_a_new_trial_under_an_orphan_waiting_for_it_is_a_cycle_refused(ledger: Ledger) -> None:
    """Imported ``a`` names ``z`` as parent before ``z`` exists; ``z`` recorded under ``a``
    (or under a descendant of ``a``) would close the cycle z -> a -> z. It is refused
    naming parent_exp, by every writer, and nothing is stored (the chain links of such a
    cycle had no end: the record did not come back)."""
    from lineage.errors import InvalidInput
    from lineage.service import RecordRequest

    ledger.projects.create_project("p")
    ledger.tables.import_trials(
        "p",
        iter(
            [
                Trial(exp_id="a", parent_exp="z", status=FailureLabel.KEEP, core_metric=2.0),
                Trial(exp_id="b", parent_exp="a", status=FailureLabel.KEEP, core_metric=1.5),
            ]
        ),
    )
    cycle = {"exp_id": "z", "parent_exp": "b", "status": "keep", "core_metric": 1.0}
    with pytest.raises(InvalidInput) as refused:
        ledger.recording.record_trial("p", cycle)
    assert refused.value.field == "parent_exp" and "cycle" in refused.value.reason
    with pytest.raises(InvalidInput) as refused:
        ledger.recording.record_trials("p", [{"exp_id": "y", "status": "discard", "core_metric": 3.0}, cycle])
    assert refused.value.field == "trials[1].parent_exp"
    outcomes = ledger.recording.record_group(
        "p", [RecordRequest({"exp_id": "y", "status": "discard", "core_metric": 3.0}), RecordRequest(cycle)]
    )
    assert isinstance(outcomes[1], InvalidInput) and outcomes[1].field == "parent_exp"
    assert sorted(t.exp_id for t in ledger.trials.list_trials("p")) == ["a", "b", "y"]
    ledger.recording.record_trial(
        "p", {"exp_id": "z", "parent_exp": "", "status": "keep", "core_metric": 1.0}
    )  # a root: no cycle
    assert_links(ledger, "p")
