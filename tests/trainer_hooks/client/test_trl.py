"""TRL's ``GRPOTrainer`` with the ledger's ``LedgerCallback``, against a real ``lineage serve``:
a tiny GPT-2 and a word-level tokenizer built in code (nothing downloaded), a reward
function in Python, a four-prompt in-memory dataset, three optimizer steps on the CPU.
The ledger must hold exactly the reward, KL and clip telemetry TRL logged, at TRL's steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import API
from tests.trainer_hooks.client.test_adapters import recorder, trial

pytestmark = pytest.mark.slow

WORDS = ["<pad>", "<eos>", "<unk>", "a", "b", "c", "d", "say", "count"]


def tiny_model_dir(path: Path) -> str:
    """A one-layer GPT-2 and its word-level tokenizer, saved to ``path`` (GRPOTrainer builds
    the reference model for the KL term from the policy's path)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=words, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", padding_side="left"
    )
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(WORDS),
        n_positions=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=1,
        eos_token_id=1,
        pad_token_id=0,
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def count_a(completions: list[str], **kwargs: Any) -> list[float]:
    """The reward: how many times the completion says ``a``."""
    return [float(text.split().count("a")) for text in completions]


def test_grpo_trainer_run_is_recorded_with_its_reward_kl_and_clip_telemetry(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    trl = pytest.importorskip("trl")
    from trainer_hooks.callbacks.hf import LedgerCallback

    class Seen(transformers.TrainerCallback):  # type: ignore[misc]
        """What TRL handed to its callbacks: ``(global_step, logs)``."""

        def __init__(self) -> None:
            self.logs: list[tuple[int, dict[str, Any]]] = []

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            self.logs.append((state.global_step, dict(logs or {})))

    server = serve(str(tmp_path / "ledger.db"))
    model = tiny_model_dir(tmp_path / "tiny")
    callback = LedgerCallback(
        recorder(server, tmp_path, lower_is_better=False, hypothesis="grpo tiny"), metric_key="reward"
    )
    seen = Seen()
    # beta > 0: TRL computes and logs the KL; num_iterations=2 with a small epsilon: the
    # second pass over a generation batch moves the ratio off 1 and clips some tokens
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        beta=0.1,
        num_iterations=2,
        epsilon=0.05,
        learning_rate=1e-2,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    prompts = datasets.Dataset.from_dict({"prompt": ["say a", "say b", "count c", "say d"]})
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=count_a, args=args, train_dataset=prompts, callbacks=[callback, seen]
    )
    trainer.train()

    logged: dict[str, dict[int, float]] = {}
    for step, logs in seen.logs:
        for name, value in logs.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                logged.setdefault(name, {})[step] = float(value)
    assert {"reward", "reward_std", "kl", "clip_ratio/region_mean", "clip_ratio/low_mean"} <= set(logged)
    assert any(v > 0 for v in logged["kl"].values()) and any(v > 0 for v in logged["clip_ratio/region_mean"].values())

    found = trial(server, callback.recorder.exp_id)
    assert found["status"] == "keep" and found["hypothesis"] == "grpo tiny"
    assert found["core_metric"] == logged["reward"][max(logged["reward"])]  # the last reward logged
    series = httpx.get(f"{server.url}{API}/projects/p/trials/{found['exp_id']}/telemetry", timeout=60).json()["series"]
    stored = {s["name"]: dict(zip(s["step"], s["value"])) for s in series if s["turn"] is None}
    for name in (
        "reward",
        "reward_std",
        "rewards/count_a/mean",
        "kl",
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "clip_ratio/region_mean",
        "entropy",
        "loss",
    ):
        assert stored[name] == pytest.approx(logged[name], rel=1e-12), name
    assert sorted(stored["kl"]) == [1, 2, 3]
