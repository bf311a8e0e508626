"""The HF/TRL callback keeps what a trainer expects a tracker to keep: the run's
hyperparameters and model config, the key that scored the trial, and the checkpoint.
A tiny GPT-2 built from a config (no download) trains on CPU against a real ``lineage serve``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import API
from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.callbacks import TrialRecorder

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


class Tokens(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, Any]:
        ids = (torch.arange(8) + i) % 32
        return {"input_ids": ids, "labels": ids}


def tiny_trainer(tmp_path: Path, callback: Any, **args: Any) -> Any:
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    )
    settings: dict[str, Any] = dict(
        output_dir=str(tmp_path / "hf"),
        max_steps=4,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=4,
        learning_rate=3e-4,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        disable_tqdm=True,
    )
    settings.update(args)
    return transformers.Trainer(
        model=model,
        args=transformers.TrainingArguments(**settings),
        train_dataset=Tokens(),
        eval_dataset=Tokens(),
        callbacks=[callback],
    )


def callback_for(server: Any, tmp_path: Path) -> Any:
    from trainer_hooks.callbacks.hf import LedgerCallback

    client = fast_client(server.url, tmp_path / "spool")
    client.ensure_project(lower_is_better=True)
    return LedgerCallback(TrialRecorder(client, hypothesis="hf tiny"), metric_key="eval_loss")


def stored(server: Any, exp_id: str | None) -> dict[str, Any]:
    assert exp_id is not None
    return httpx.get(f"{server.url}{API}/projects/p/trials/{exp_id}", timeout=60).json()


def test_the_trial_keeps_the_arguments_the_model_config_the_scoring_key_and_the_best_checkpoint(
    serve,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    server = serve(str(tmp_path / "ledger.db"))
    callback = callback_for(server, tmp_path)
    trainer = tiny_trainer(tmp_path, callback, load_best_model_at_end=True, metric_for_best_model="eval_loss")
    trainer.train()
    found = stored(server, callback.recorder.exp_id)
    config = found["extra"]["config"]
    model_config = config.pop("model_config")
    assert config == json.loads(json.dumps(trainer.args.to_dict(), default=str))  # every argument, as JSON
    assert model_config["n_embd"] == 16 and model_config["vocab_size"] == 32 and model_config["model_type"] == "gpt2"
    config["model_config"] = model_config
    assert config["learning_rate"] == 3e-4 and config["max_steps"] == 4 and config["model_config"]["n_embd"] == 16
    assert found["extra"]["metric_key"] == "eval_loss" and found["extra"]["metric_step"] == 4
    assert found["core_metric"] == pytest.approx(trainer.state.log_history[-2]["eval_loss"])
    assert found["snapshot_path"] == os.path.abspath(trainer.state.best_model_checkpoint)
    assert found["extra"]["checkpoint"] == "best" and os.path.isdir(found["snapshot_path"])


def test_without_a_best_checkpoint_the_last_one_saved_is_the_snapshot(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    callback = callback_for(server, tmp_path)
    tiny_trainer(tmp_path, callback).train()
    found = stored(server, callback.recorder.exp_id)
    assert found["snapshot_path"] == str((tmp_path / "hf" / "checkpoint-4").resolve())
    assert found["extra"]["checkpoint"] == "last"
    # nothing saved: no snapshot claimed
    callback = callback_for(server, tmp_path / "again")
    tiny_trainer(tmp_path / "again", callback, save_strategy="no").train()
    found = stored(server, callback.recorder.exp_id)
    assert not found["snapshot_path"] and "checkpoint" not in found["extra"]
    assert found["extra"]["config"]["save_strategy"] == "no"
