"""``trainer_hooks.api.Api`` reads a real ``lineage serve`` back: projects, trials (dicts
and a DataFrame), telemetry, the best, a chain, a knob's history, and refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.api import Api, ApiError

pytestmark = pytest.mark.slow


@pytest.fixture
def ledger(serve, tmp_path: Path) -> Any:  # type: ignore[no-untyped-def]
    """A project "p" (lower is better) with a baseline and three recorded runs, each
    with telemetry and a config: 000 baseline 2.0, 001 keep 1.5, 002 discard 1.8, 003 keep 1.2."""
    server = serve(str(tmp_path / "ledger.db"))
    setup = fast_client(server.url, tmp_path / "spool")
    setup.ensure_project(lower_is_better=True)
    setup.flush(60)
    setup.record_trials([{"status": "baseline", "core_metric": 2.0, "hypothesis": "base"}])
    setup.close()
    for n, (lr, metric) in enumerate([(3e-4, 1.5), (1e-3, 1.8), (1e-4, 1.2)]):
        client = fast_client(server.url, tmp_path / f"spool-{n}")
        client.plan_trial(hypothesis=f"lr {lr}", extra={"config": {"lr": lr, "layers": 2}})
        for step in range(5):
            client.log(step, {"loss": metric + 1.0 / (step + 1)})
        client.log_turns(4, {"ig_mean": [0.1, 0.2]})
        client.finish_trial(core_metric=metric, extra={"config": {"lr": lr, "layers": 2}})
        client.close()
    return server


def test_projects_trials_best_and_chain(ledger: Any) -> None:
    with Api(ledger.url) as api:
        assert [p["slug"] for p in api.projects()] == ["p"]
        assert api.project("p")["lower_is_better"] is True
        trials = api.trials("p")
        assert [(t["exp_id"], t["status"], t["core_metric"]) for t in trials] == [
            ("000", "baseline", 2.0),
            ("001", "keep", 1.5),
            ("002", "discard", 1.8),
            ("003", "keep", 1.2),
        ]
        assert trials[1]["extra"]["config"] == {"lr": 3e-4, "layers": 2}
        assert [t["exp_id"] for t in api.trials("p", filter="status = keep and core_metric < 1.4")] == ["003"]
        assert [t["exp_id"] for t in api.trials("p", status=["discard", "baseline"])] == ["000", "002"]
        assert [t["exp_id"] for t in api.trials("p", sort="-core_metric", limit=2)] == ["000", "002"]
        assert api.trial("p", "003")["hypothesis"] == "lr 0.0001"
        assert api.best("p")["exp_id"] == "003"
        assert [t["exp_id"] for t in api.chain("p", "003")] == ["000", "001", "003"]


def test_telemetry_series_by_name_and_turn(ledger: Any) -> None:
    with Api(ledger.url) as api:
        series = api.telemetry("p", "001")
        assert set(series) == {"loss", "ig_mean[0]", "ig_mean[1]"}
        assert series["loss"]["step"] == [0, 1, 2, 3, 4]
        assert series["loss"]["value"] == pytest.approx([1.5 + 1.0 / (s + 1) for s in range(5)])
        assert series["ig_mean[1]"]["value"] == [0.2]
        assert set(api.telemetry("p", "001", names=["loss"], step_min=3)) == {"loss"}
        assert api.telemetry("p", "001", names=["loss"], step_min=3)["loss"]["step"] == [3, 4]


def test_trials_as_a_dataframe_with_extra_flattened(ledger: Any) -> None:
    pytest.importorskip("pandas")
    with Api(ledger.url) as api:
        frame = api.trials_frame("p")
    assert list(frame.index) == ["000", "001", "002", "003"]
    assert frame.loc["002", "status"] == "discard"
    assert frame.loc["003", "extra.config.lr"] == pytest.approx(1e-4)
    assert frame["core_metric"].tolist() == [2.0, 1.5, 1.8, 1.2]


def test_knob_history(ledger: Any) -> None:
    with Api(ledger.url) as api:
        history = api.knob_history("p", "lr")
    assert history["tried"] >= 1 and history["values"]


def test_refusals_name_the_status_and_the_problem(ledger: Any) -> None:
    with Api(ledger.url) as api:
        with pytest.raises(ApiError) as missing:
            api.trial("p", "999")
        assert missing.value.status == 404 and "999" in str(missing.value)
        with pytest.raises(ApiError) as bad:
            api.trials("p", filter="core_metric <")
        assert bad.value.status == 422 and bad.value.field == "filter"
        with pytest.raises(ApiError) as nowhere:
            api.trials("nope")
        assert nowhere.value.status == 404


def test_importing_the_read_api_needs_no_server_code() -> None:
    code = (
        "import sys, trainer_hooks.api\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('lineage', 'api', 'sqlalchemy', 'fastapi', 'torch'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
