"""The trainer's lifecycle against a real ledger, with a real ``transformers.Trainer`` on the
CPU and a tiny model built in code: the documented ``with recorder:`` around
``trainer.train()``, a second ``train()`` with the same callback, a metric key that is
never logged."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.trainer_hooks.client.test_adapters import recorder, trial

pytestmark = pytest.mark.slow


def tiny_trainer(tmp_path: Path, callback: Any, *, max_steps: int = 2, evaluate: bool = True) -> Any:
    """A one-layer GPT-2 on 16 fixed sequences, logging every step; evaluated at the last
    step when ``evaluate``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    )

    class Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = (torch.arange(8) + i) % 32
            return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=max_steps,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=4,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=max_steps,
        save_strategy="no",
        disable_tqdm=True,
    )
    return transformers.Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(),
        eval_dataset=Tokens() if evaluate else None,
        callbacks=[callback],
    )


def test_with_recorder_around_a_successful_train_finishes_once(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from trainer_hooks.callbacks.hf import LedgerCallback

    server = serve(str(tmp_path / "ledger.db"))
    rec = recorder(server, tmp_path, hypothesis="wrapped")
    callback = LedgerCallback(rec, metric_key="eval_loss")
    with rec:
        tiny_trainer(tmp_path, callback).train()
    found = trial(server, rec.exp_id)
    assert found["status"] == "keep" and found["core_metric"] is not None and found["hypothesis"] == "wrapped"
    assert rec.finish() == "auto"  # again: nothing more is sent


def test_a_second_train_with_the_same_callback_is_a_new_trial(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import httpx

    from tests.api.conftest import API
    from trainer_hooks.callbacks.hf import LedgerCallback

    server = serve(str(tmp_path / "ledger.db"))
    rec = recorder(server, tmp_path, hypothesis="twice")
    callback = LedgerCallback(rec, metric_key="eval_loss")
    with rec:
        trainer = tiny_trainer(tmp_path, callback)
        trainer.train()
        first = rec.exp_id
        trainer.evaluate()  # after train(): no trial runs; nothing recorded, nothing raised
        trainer.args.max_steps = 3
        trainer.train()  # as hyperparameter_search does: the same callback, another run
    second = rec.exp_id
    assert first is not None and second is not None and first != second
    for exp_id, steps in ((first, [1, 2]), (second, [1, 2, 3])):
        found = trial(server, exp_id)
        assert found["status"] in ("keep", "discard") and found["core_metric"] is not None
        assert found["hypothesis"] == "twice" and found["extra"]["state"] == "finished"
        series = httpx.get(f"{server.url}{API}/projects/p/trials/{exp_id}/telemetry", timeout=60).json()["series"]
        assert next(s for s in series if s["name"] == "loss")["step"] == steps
    assert len(httpx.get(f"{server.url}{API}/projects/p/trials", timeout=60).json()["items"]) == 2
    assert rec.client.run_id.endswith("-2") and not list((tmp_path / "spool").iterdir())


def test_a_metric_key_never_logged_is_a_warning_and_no_metric(serve, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    from trainer_hooks.callbacks.hf import LedgerCallback

    server = serve(str(tmp_path / "ledger.db"))
    callback = LedgerCallback(recorder(server, tmp_path, hypothesis="no eval set"), metric_key="eval_loss")
    with caplog.at_level(logging.WARNING):
        tiny_trainer(tmp_path, callback, evaluate=False).train()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "eval_loss" in r.getMessage()]
    assert len(warned) == 1 and "never logged" in warned[0] and "grad_norm, learning_rate, loss" in warned[0]
    found = trial(server, callback.recorder.exp_id)
    assert found["core_metric"] is None and found["status"] != "keep"
    outcome = callback.outcome
    assert outcome is not None and "no metric" in outcome.describe() and "new best" not in outcome.describe()


def test_a_plain_loop_without_a_result_is_a_warning(serve, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    with caplog.at_level(logging.WARNING), recorder(server, tmp_path) as rec:
        rec.log(0, {"loss": 1.0})
    assert any("without result()" in r.getMessage() for r in caplog.records)
    assert trial(server, rec.exp_id)["core_metric"] is None


def test_ensure_project_against_an_existing_direction_warns_and_leaves_it(serve, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    import httpx

    from tests.api.conftest import API

    server = serve(str(tmp_path / "ledger.db"))
    with recorder(server, tmp_path, lower_is_better=True) as rec:
        rec.result(1.0)
    with caplog.at_level(logging.WARNING), recorder(server, tmp_path, lower_is_better=False) as rec:
        rec.result(2.0)
    assert "project 'p' keeps 'core_metric' lower-is-better, but this run declared lower_is_better=False" in caplog.text
    assert httpx.get(f"{server.url}{API}/projects/p", timeout=60).json()["lower_is_better"] is True
    assert trial(server, rec.exp_id)["status"] == "discard"  # 2.0 is worse, lower being better
