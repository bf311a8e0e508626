"""The adapters against a real ledger: TrialRecorder (kept, discarded, failures labelled),
the transformers TrainerCallback with a real Trainer and a tiny model built in code, and
the verl-style hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import API
from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.callbacks import TrialRecorder, verl_hook
from trainer_hooks.client import EvalBudgetExceeded, TrainBudgetExceeded

pytestmark = pytest.mark.slow


def trial(server: Any, exp_id: str | None, project: str = "p") -> dict[str, Any]:
    assert exp_id is not None
    return httpx.get(f"{server.url}{API}/projects/{project}/trials/{exp_id}", timeout=60).json()


def recorder(server: Any, tmp_path: Path, *, lower_is_better: bool = True, **kwargs: Any) -> TrialRecorder:
    client = fast_client(server.url, tmp_path / "spool")
    client.ensure_project(lower_is_better=lower_is_better)
    return TrialRecorder(client, **kwargs)


def run(server: Any, tmp_path: Path, metric: float | None, **kwargs: Any) -> dict[str, Any]:
    with recorder(server, tmp_path, **kwargs) as rec:
        rec.log(0, {"loss": 1.0})
        rec.result(metric)
    return trial(server, rec.exp_id)


def test_recorder_keeps_only_what_beats_the_best_by_the_margin(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    first = run(server, tmp_path, 1.0, hypothesis="baseline-ish")
    assert first["status"] == "keep" and first["train_s"] is not None
    assert run(server, tmp_path, 0.95, keep_margin=0.1)["status"] == "discard"  # better, not by 0.1
    kept = run(server, tmp_path, 0.85, keep_margin=0.1)
    assert kept["status"] == "keep" and kept["delta_vs_best"] == pytest.approx(-0.15)
    assert run(server, tmp_path, 2.0)["status"] == "discard"  # worse (lower is better)


def test_recorder_follows_the_project_direction(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    run(server, tmp_path, 0.5, lower_is_better=False)
    assert run(server, tmp_path, 0.6, lower_is_better=False)["status"] == "keep"
    assert run(server, tmp_path, 0.4, lower_is_better=False)["status"] == "discard"


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"), "size_blocked"),
        (MemoryError(), "size_blocked"),
        (TrainBudgetExceeded("ran 9 h of 8"), "train_budget_overrun"),
        (EvalBudgetExceeded("eval ran 2 h"), "eval_budget_overrun"),
        (ValueError("shapes [4, 8] and [4, 9]"), "crash"),
        (KeyboardInterrupt(), "harness_abort"),
    ],
)
def test_recorder_labels_the_failure_and_keeps_the_exception_in_notes(
    serve, tmp_path: Path, error: BaseException, label: str
) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    rec = recorder(server, tmp_path)
    with pytest.raises(type(error)):
        with rec:
            rec.log(0, {"loss": 1.0})
            raise error
    found = trial(server, rec.exp_id)
    assert found["status"] == label
    assert found["notes"].startswith(type(error).__name__) and "test_adapters.py" in found["notes"]


def test_evaluation_over_budget_is_labelled(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    with recorder(server, tmp_path, eval_budget_s=1.0) as rec:
        rec.result(0.1, eval_s=3.0)
    found = trial(server, rec.exp_id)
    assert found["status"] == "eval_budget_overrun" and "over its budget" in found["notes"]


def test_verl_hook_logs_step_metrics_and_finishes_with_the_validation_metric(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    hook = verl_hook(
        recorder(server, tmp_path, lower_is_better=False, hypothesis="verl"),
        core_metric_key="val-core/lookup/reward/mean@1",
    )
    for step in range(3):
        hook(
            {
                "actor/pg_loss": 0.1 * step,
                "actor/clip_scale_mean": 1.0 + 0.01 * step,
                "actor/clip_scale_std": 0.1,
                "actor/clip_scale_min": 0.8,
                "actor/clip_scale_max": 1.2,
                "actor/clip_scale_frac_low": 0.0,
                "actor/clip_scale_frac_high": 0.05,
                "timing/gen": 1.5,
                "note": "text is skipped",
            },
            step=step,
        )
    assert hook.final({"val-core/lookup/reward/mean@1": 0.7}) == "auto"
    found = trial(server, hook.recorder.exp_id)
    assert found["status"] == "keep" and found["core_metric"] == 0.7
    assert found["ig_clip_scale_mean"] == pytest.approx(1.01)
    series = httpx.get(f"{server.url}{API}/projects/p/trials/{found['exp_id']}/telemetry", timeout=60).json()["series"]
    assert {s["name"] for s in series} >= {"actor/pg_loss", "clip_scale_mean", "timing/gen"}
    assert all(s["count"] == 3 for s in series)


def test_transformers_callback_records_a_real_trainer_run(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trainer_hooks.callbacks.hf import LedgerCallback

    server = serve(str(tmp_path / "ledger.db"))
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    )

    class Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = (torch.arange(8) + i) % 32
            return {"input_ids": ids, "labels": ids}

    callback = LedgerCallback(recorder(server, tmp_path, hypothesis="hf tiny"), metric_key="eval_loss")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=4,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=4,
        eval_strategy="steps",
        eval_steps=4,
        save_strategy="no",
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), eval_dataset=Tokens(), callbacks=[callback]
    ).train()
    found = trial(server, callback.recorder.exp_id)
    assert found["status"] == "keep" and found["core_metric"] is not None and found["hypothesis"] == "hf tiny"
    series = httpx.get(f"{server.url}{API}/projects/p/trials/{found['exp_id']}/telemetry", timeout=60).json()["series"]
    loss = next(s for s in series if s["name"] == "loss")
    assert loss["step"] == [1, 2, 3, 4]
