"""One process of a 2-rank job under ``torchrun`` (gloo, CPU), for the rank-0 tests.

    torchrun --nproc_per_node 2 tests/trainer_hooks/client/ddp_process.py URL SPOOL_DIR [plain|hf]

``plain``: a hand-written DDP loop (``init_process_group``, an all-reduced loss) in a
:class:`TrialRecorder`; the client is made while ``RANK`` is set, as torchrun sets it.
``hf``: a ``transformers.Trainer`` with :class:`LedgerCallback`, whose client is made with
``RANK`` hidden (a launcher that does not set it): the process group the Trainer makes, or
the Trainer's ``is_world_process_zero``, must tell the other rank to stand down.
Every rank prints ``rank <r> active <bool> exp_id <id>`` at the end.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import torch.distributed as dist

from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.callbacks import TrialRecorder


def plain(url: str, spool_dir: str) -> TrialRecorder:
    client = fast_client(url, spool_dir, "ddp", keep_spool=True)
    client.ensure_project(lower_is_better=True)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.ones(4))
    with TrialRecorder(client, hypothesis="ddp plain") as rec:
        for step in range(3):
            loss = (weight * torch.arange(4.0)).sum() / (step + 1)
            dist.all_reduce(loss)
            rec.log(step, {"loss": loss / dist.get_world_size()})
        rec.result(float(loss))
    dist.destroy_process_group()
    return rec


def hf(url: str, spool_dir: str) -> TrialRecorder:
    import transformers

    from trainer_hooks.callbacks.hf import LedgerCallback

    launched_as = os.environ.pop("RANK")
    client = fast_client(url, spool_dir, "ddp-hf", keep_spool=True)
    client.ensure_project(lower_is_better=True)
    os.environ["RANK"] = launched_as  # the process group needs it
    rec = TrialRecorder(client, hypothesis="ddp hf")
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
        output_dir=os.path.join(spool_dir, "..", "hf"),
        max_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        per_device_train_batch_size=2,
        save_strategy="no",
        disable_tqdm=True,
    )
    callback = LedgerCallback(rec, metric_key="loss")
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback]).train()
    return rec


def main() -> None:
    url, spool_dir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    rec = plain(url, spool_dir) if mode == "plain" else hf(url, spool_dir)
    print(f"rank {os.environ['RANK']} active {rec.client.active} exp_id {rec.exp_id}", flush=True)


if __name__ == "__main__":
    main()
