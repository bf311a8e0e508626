"""An overnight RL run in miniature: A²TGPO on a multi-hop look-up task, on CPU, recorded
in the ledger while it trains.

The task: a generated fact table ``next: entity -> entity``; a question names a start
entity ``s`` and a hop count ``h``; the gold answer is ``next^h(s)``. Each turn the policy
names an entity to look up and the tool reveals that entity's fact, so a good policy
looks up ``s``, then what it learnt, ... and answers with the last fact. Every sequence
has the same layout (``L = 3 + 3 * max_hops + 2`` tokens)::

    BOS HOP_h s | LOOK x_0 f(x_0) | ... | LOOK x_{h-1} f(x_{h-1}) | ANS a | PAD ...
                       ^ turn 0               ^ turn h-1               ^ outcome turn h

The policy is a tiny causal transformer built here (no download). Each step samples
``samples`` trajectories for each of ``questions`` questions, measures the information
gain of each turn from the gold answer (:func:`information_gain_from_model`: the gold
answer's probability after each turn's context), computes A²TGPO advantages
(turn-group normalization, variance-rescaled accumulation, adaptive clip scale) and
takes PPO epochs with the A²TGPO policy loss; a SmallGain-KL allocator (``--allocator``)
shapes the per-token step. Every step it logs the estimator's and the loss's telemetry,
the per-turn statistics, and the allocator's budget; at the end it evaluates greedy
accuracy on held-out questions (the trial's core_metric, higher is better) and finishes
the trial by the outcome rule. The next morning the trial is in ``lineage knowledge``
and on ``/projects/<project>/trials/<exp_id>`` with its plots.

    lineage serve &                                   # the ledger, http://127.0.0.1:8000
    python examples/overnight_toy.py --url http://127.0.0.1:8000 --project toy --steps 200

For a real model, replace :class:`TinyCausalLM` and :func:`rollout` with your policy and
environment; the ledger part (:class:`LedgerClient`, :class:`TrialRecorder`, the logging
calls in :func:`train_step`) stays as it is.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from trainer_hooks.advantages.a2tgpo import compute_a2tgpo_advantages, information_gain_from_model  # noqa: E402
from trainer_hooks.allocator import SmallGainKLAllocator, position_group_ids, scale_grad  # noqa: E402
from trainer_hooks.callbacks import TrialRecorder  # noqa: E402
from trainer_hooks.client import LedgerClient  # noqa: E402
from trainer_hooks.losses.ppo import a2tgpo_policy_loss  # noqa: E402
from trainer_hooks.step_telemetry import step_telemetry, token_entropy, turn_telemetry, turn_token_telemetry  # noqa: E402


@dataclass
class Config:
    """Hyperparameters; the defaults are the CI's small run."""

    entities: int = 12  # size of the fact table
    max_hops: int = 3  # questions need 1..max_hops look-ups (turns)
    questions: int = 8  # prompts per step (GRPO groups)
    samples: int = 4  # trajectories per prompt
    steps: int = 6  # training steps
    ppo_epochs: int = 2  # passes over each step's batch
    lr: float = 3e-3
    d_model: int = 32
    layers: int = 1
    clip_beta: float = 0.3  # adaptive clip-scale amplitude
    adv_rescale_alpha: float = 0.3
    allocator: bool = True  # SmallGain-KL allocator on 4 position groups
    eval_questions: int = 64
    seed: int = 0


# -- the task -------------------------------------------------------------------------------


class Vocab:
    """Entities ``0 .. E-1``, then PAD, BOS, LOOK, ANS and one HOP token per hop count."""

    def __init__(self, entities: int, max_hops: int) -> None:
        self.E = entities
        self.PAD, self.BOS, self.LOOK, self.ANS = entities, entities + 1, entities + 2, entities + 3
        self.HOP0 = entities + 4
        self.size = self.HOP0 + max_hops + 1


def fact_table(entities: int, generator: torch.Generator) -> Tensor:
    """``next: [E]``, a random permutation without fixed points (every hop moves)."""
    while True:
        perm = torch.randperm(entities, generator=generator)
        if not (perm == torch.arange(entities)).any():
            return perm


def questions(n: int, cfg: Config, facts: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """``(start [n], hops [n], gold [n])``: ``gold = next^hops(start)``."""
    start = torch.randint(cfg.entities, (n,), generator=generator)
    hops = torch.randint(1, cfg.max_hops + 1, (n,), generator=generator)
    gold = start.clone()
    for h in range(cfg.max_hops):  # hops are few; vectorized over questions
        gold = torch.where(hops > h, facts[gold], gold)
    return start, hops, gold


# -- the policy -----------------------------------------------------------------------------


class TinyCausalLM(nn.Module):
    """A one-or-two-layer causal transformer: ``input_ids [N, S]`` -> logits ``[N, S, V]``."""

    def __init__(self, vocab: int, d_model: int, layers: int, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead=4, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        S = input_ids.shape[1]
        x = self.embed(input_ids) + self.pos(torch.arange(S, device=input_ids.device))
        causal = torch.ones(S, S, dtype=torch.bool, device=input_ids.device).triu_(1)  # True: may not attend
        pad = None if attention_mask is None else ~attention_mask.to(torch.bool)
        return self.head(self.blocks(x, mask=causal, src_key_padding_mask=pad, is_causal=True))


def entity_logprobs(model: nn.Module, seq: Tensor, vocab: Vocab) -> Tensor:
    """Log-probs over the entities of the token at each position: ``[B, L, E]`` (position
    ``p`` from the logits at ``p - 1``; position 0 gets zeros)."""
    logits = model(seq)[:, :-1, : vocab.E]
    return nn.functional.pad(torch.log_softmax(logits.float(), -1), (0, 0, 1, 0))


# -- rollouts -------------------------------------------------------------------------------


@dataclass
class Rollout:
    """``seq, turn_ids: [B, L]``; ``hops, gold, reward, group: [B]``; ``ig_mask: [B, T]``."""

    seq: Tensor
    turn_ids: Tensor
    hops: Tensor
    gold: Tensor
    reward: Tensor
    group: Tensor
    ig_mask: Tensor


def rollout(
    model: nn.Module,
    start: Tensor,
    hops: Tensor,
    gold: Tensor,
    facts: Tensor,
    vocab: Vocab,
    cfg: Config,
    *,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> Rollout:
    """Play every question to the end (``max_hops + 1`` forward passes, batched)."""
    B, T = start.shape[0], cfg.max_hops
    L = 3 + 3 * T + 2
    seq = torch.full((B, L), vocab.PAD, dtype=torch.long)
    turn_ids = torch.full((B, L), -1, dtype=torch.long)
    seq[:, 0], seq[:, 1], seq[:, 2] = vocab.BOS, vocab.HOP0 + hops, start
    with torch.no_grad():
        for t in range(T + 1):
            look, pos = 3 + 3 * t, 4 + 3 * t
            asking, answering = t < hops, t == hops
            seq[:, look] = torch.where(asking, vocab.LOOK, torch.where(answering, vocab.ANS, vocab.PAD))
            logits = model(seq[:, :pos])[:, -1, : vocab.E]
            picked = (
                logits.argmax(-1)
                if greedy
                else torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)
            )
            active = asking | answering
            seq[:, pos] = torch.where(active, picked, vocab.PAD)
            turn_ids[:, pos] = torch.where(active, torch.full_like(hops, t), -1)
            if t < T:  # the tool reveals the fact of the looked-up entity
                seq[:, pos + 1] = torch.where(asking, facts[picked], vocab.PAD)
    answer = seq.gather(1, (4 + 3 * hops).unsqueeze(1)).squeeze(1)
    reward = (answer == gold).float()
    ig_mask = torch.arange(T).unsqueeze(0) < hops.unsqueeze(1)
    return Rollout(seq, turn_ids, hops, gold, reward, torch.zeros(B, dtype=torch.long), ig_mask)


def gold_contexts(run: Rollout, vocab: Vocab, max_hops: int) -> tuple[Tensor, Tensor]:
    """Contexts after each turn ``k = 0 .. T`` ending in ``ANS``: ``ids, mask: [B, T+1, C]``."""
    B = run.seq.shape[0]
    prefix = run.seq[:, : 3 + 3 * max_hops]
    C = prefix.shape[1] + 1
    ids = torch.cat([prefix, torch.full((B, 1), vocab.ANS)], 1).unsqueeze(1).expand(B, max_hops + 1, C)
    k = torch.arange(max_hops + 1).view(1, -1, 1)
    col = torch.arange(C).view(1, 1, -1)
    mask = (col < 3 + 3 * k) | (col == C - 1)
    mask = mask & (k <= run.hops.view(-1, 1, 1))  # no context past a trajectory's last turn
    return ids, mask.expand(B, -1, -1)


# -- one training step ------------------------------------------------------------------------


def train_step(
    step: int,
    model: nn.Module,
    ref: nn.Module,
    optimizer: torch.optim.Optimizer,
    facts: Tensor,
    vocab: Vocab,
    cfg: Config,
    generator: torch.Generator,
    allocator: SmallGainKLAllocator | None,
    run: TrialRecorder,
) -> dict[str, float]:
    start, hops, gold = questions(cfg.questions, cfg, facts, generator)
    rep = lambda x: x.repeat_interleave(cfg.samples)  # noqa: E731
    played = rollout(model, rep(start), rep(hops), rep(gold), facts, vocab, cfg, generator=generator)
    played.group = rep(torch.arange(cfg.questions))

    ctx_ids, ctx_mask = gold_contexts(played, vocab, cfg.max_hops)
    ig, _ = information_gain_from_model(
        model, ctx_ids, ctx_mask, played.gold.unsqueeze(1), turn_mask=played.ig_mask, pad_token_id=vocab.PAD
    )
    adv = compute_a2tgpo_advantages(
        played.reward,
        played.group,
        ig,
        played.ig_mask,
        played.turn_ids,
        clip_beta=cfg.clip_beta,
        adv_rescale_alpha=cfg.adv_rescale_alpha,
    )
    mask = played.turn_ids >= 0
    taken = played.seq.clamp_max(vocab.E - 1).unsqueeze(-1)
    with torch.no_grad():
        old = entity_logprobs(model, played.seq, vocab).gather(-1, taken).squeeze(-1)
        ref_lp = entity_logprobs(ref, played.seq, vocab).gather(-1, taken).squeeze(-1)
    token_weight = None
    if allocator is not None:
        groups = position_group_ids(mask, allocator.num_groups)
        shaped = allocator.step(adv.advantages, old - ref_lp, mask, groups, budget=0.05)
        token_weight = shaped.token_lambda
    for _ in range(cfg.ppo_epochs):
        logits = model(played.seq)
        logp_all = nn.functional.pad(torch.log_softmax(logits[:, :-1, : vocab.E].float(), -1), (0, 0, 1, 0))
        logp = logp_all.gather(-1, taken).squeeze(-1)
        if token_weight is not None:
            logp = scale_grad(logp, token_weight)
        loss, policy = a2tgpo_policy_loss(
            old,
            logp,
            adv.advantages,
            mask,
            clip_scale=adv.clip_scale,
            turn_ids=played.turn_ids,
            clip_beta=cfg.clip_beta,
            ig=ig,
            ig_mask=played.ig_mask,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    entropy = nn.functional.pad(token_entropy(logits[:, :-1, : vocab.E]), (1, 0))  # [B, L], as logp
    extra = step_telemetry(adv.advantages, mask, log_ratio=(logp - old).detach(), entropy=entropy)
    metrics = {
        **adv.telemetry,
        **policy,
        **extra,
        "reward_mean": played.reward.mean(),
        **(allocator.telemetry() if allocator is not None else {}),
    }
    run.log(step, metrics)
    run.log_turns(
        step,
        turn_telemetry(
            adv.turn_clip_scale,
            adv.turn_advantages,
            adv.turn_valid,
            ig,
            played.ig_mask,
            adv.normed_ig,
            clip_beta=cfg.clip_beta,
        ),
    )
    run.log_turns(step, turn_token_telemetry(played.turn_ids, mask, log_ratio=(logp - old).detach(), entropy=entropy))
    return {"reward": float(played.reward.mean()), "loss": float(loss.detach())}


def evaluate(model: nn.Module, facts: Tensor, vocab: Vocab, cfg: Config) -> float:
    """Greedy accuracy on held-out questions (a fixed seed: the same questions every run)."""
    generator = torch.Generator().manual_seed(10_000 + cfg.seed)
    start, hops, gold = questions(cfg.eval_questions, cfg, facts, generator)
    return float(rollout(model, start, hops, gold, facts, vocab, cfg, greedy=True).reward.mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("LINEAGE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("LINEAGE_TOKEN"))
    parser.add_argument("--project", default="overnight-toy")
    parser.add_argument("--spool-dir", default=None, help="Default: $LINEAGE_SPOOL_DIR or ~/.cache/lineage/spool")
    parser.add_argument("--hypothesis", default="A2TGPO turn-group IG advantages learn multi-hop look-ups")
    parser.add_argument("--parent", default="", help="exp_id this trial forks from")
    parser.add_argument("--keep-margin", type=float, default=0.0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    for name, default in vars(Config()).items():
        flag = f"--{name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    args = parser.parse_args(argv)
    cfg = Config(**{k: getattr(args, k) for k in vars(Config())})
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(cfg.seed)
    vocab = Vocab(cfg.entities, cfg.max_hops)
    facts = fact_table(cfg.entities, torch.Generator().manual_seed(1234))
    model = TinyCausalLM(vocab.size, cfg.d_model, cfg.layers, 3 + 3 * cfg.max_hops + 2 + 1)
    ref = copy.deepcopy(model).eval()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    allocator = SmallGainKLAllocator(4) if cfg.allocator else None

    client = LedgerClient(args.url, args.token, args.project, spool_dir=args.spool_dir, handle_sigterm=True)
    client.ensure_project(
        lower_is_better=False, title="Overnight toy: multi-hop look-ups", metric_name="greedy accuracy"
    )
    plan = {
        "hypothesis": args.hypothesis,
        "expected_delta": "+accuracy",
        "parent_exp": args.parent,
        "specialist": "a2tgpo-toy",
        "domain": "multi-hop-lookup",
        "job_name": "overnight_toy",
        "extra": {"config": vars(cfg)},
    }
    started = time.monotonic()
    with TrialRecorder(client, keep_margin=args.keep_margin, **plan) as run:
        for step in range(cfg.steps):
            stats = train_step(step, model, ref, optimizer, facts, vocab, cfg, generator, allocator, run)
            print(f"step {step}: reward {stats['reward']:.3f} loss {stats['loss']:+.4f}", flush=True)
        run.training_done()
        t0 = time.monotonic()
        accuracy = evaluate(model, facts, vocab, cfg)
        run.result(accuracy, eval_s=time.monotonic() - t0)
    report = client.close()
    print(
        json.dumps(
            {
                "project": args.project,
                "exp_id": report.exp_id,
                "core_metric": accuracy,
                "points_logged": report.points_logged,
                "delivered": report.delivered,
                "spool": report.spool,
                "error": report.error,
                "seconds": round(time.monotonic() - started, 2),
                "trial_page": f"{args.url.rstrip('/')}/projects/{args.project}/trials/{report.exp_id}",
            }
        )
    )
    return 0 if report.delivered else 1


if __name__ == "__main__":
    raise SystemExit(main())
