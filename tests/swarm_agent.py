"""One agent of the claims soak (``tests/test_claims_swarm.py``), run as its own process:
``python -m tests.swarm_agent --url URL --project P --agent NAME --pool POOL.json --log LOG``.

Over MCP Streamable HTTP (the SDK's own ``Client``) it draws ideas from the shared pool
(a JSON list of ``{"key", "text"}``: ``key`` names the idea, several texts may share
one), claims each (``claim_trial`` with a short ``lease_s``), heartbeats while it
"works", and finishes it (``finish_claim``) with a made-up metric; a refused claim (the
project refuses duplicates) is logged and the next idea drawn. With ``--crash-at N`` it
dies (``os._exit``) right after the first heartbeat of its N-th claim, leaving that
claim to lapse.

Each event is one JSON line of ``LOG``, flushed at once (a crash loses none). Times are
``time.time()`` read so that the claim was held at each: after the claim's answer, and
*before* sending a heartbeat or a finish the ledger then accepted. So an interval from
``claimed_at`` to ``held_until`` lies within the ledger's claim, and two agents' intervals
of one idea overlapping would mean the ledger let one idea run twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from typing import Any, TextIO

from mcp.client.client import Client

#: the exit status of a deliberate crash
CRASH_STATUS = 3


def _data(result: Any) -> tuple[bool, dict[str, Any]]:
    """(ok, the JSON object) of a tool result; an error's text may have a prefix."""
    text = result.content[0].text
    return (not result.is_error, json.loads(text[text.index("{") :]))


class Agent:
    def __init__(self, client: Client, args: argparse.Namespace, log: TextIO) -> None:
        self.client, self.args, self.log = client, args, log
        self.rng = random.Random(args.seed)

    def note(self, event: str, **fields: Any) -> None:
        self.log.write(json.dumps({"event": event, "agent": self.args.agent, **fields}) + "\n")
        self.log.flush()

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
        return _data(await self.client.call_tool(tool, {"project": self.args.project, **arguments}))

    async def run(self, pool: list[dict[str, str]]) -> None:
        claims = 0
        for _ in range(self.args.attempts):
            idea = self.rng.choice(pool)
            ok, got = await self.call(
                "claim_trial", hypothesis=idea["text"], owner=self.args.agent, lease_s=self.args.lease
            )
            if not ok:
                _expect_conflict(got, "hypothesis")
                self.note("refused", key=idea["key"], text=idea["text"], error=got)
                continue
            claims += 1
            exp_id = got["trial"]["exp_id"]
            claimed_at = time.time()
            self.note("claimed", key=idea["key"], text=idea["text"], exp_id=exp_id, claimed_at=claimed_at)
            held_until = claimed_at
            lost = False
            for beat in range(self.args.beats):
                await asyncio.sleep(self.args.work_s)
                sent = time.time()
                ok, got = await self.call("heartbeat", exp_id=exp_id, owner=self.args.agent)
                if not ok:  # lapsed meanwhile (a slow machine): the ledger ended it
                    _expect_conflict(got, "status")
                    self.note("lost", key=idea["key"], exp_id=exp_id, claimed_at=claimed_at, held_until=held_until)
                    lost = True
                    break
                held_until = sent
                if claims == self.args.crash_at and beat == 0:
                    self.note("crashed", key=idea["key"], exp_id=exp_id, claimed_at=claimed_at, held_until=held_until)
                    os._exit(CRASH_STATUS)
            if lost:
                continue
            metric = round(self.rng.uniform(0.5, 1.5), 4)
            sent = time.time()
            ok, got = await self.call(
                "finish_claim", exp_id=exp_id, owner=self.args.agent, changes={"core_metric": metric}
            )
            if ok:
                self.note(
                    "finished",
                    key=idea["key"],
                    exp_id=exp_id,
                    claimed_at=claimed_at,
                    held_until=sent,
                    core_metric=metric,
                    status=got["status"],
                )
            else:
                _expect_conflict(got, "status")
                self.note("lost", key=idea["key"], exp_id=exp_id, claimed_at=claimed_at, held_until=held_until)


def _expect_conflict(error: dict[str, Any], field: str) -> None:
    """An agent goes on only after the refusal it can meet: a conflict naming ``field``."""
    if error.get("code") != "conflict" or error.get("field") != field:
        raise RuntimeError(f"unexpected tool error: {error}")


async def _main(args: argparse.Namespace) -> None:
    with open(args.pool) as fh:
        pool = json.load(fh)
    with open(args.log, "a") as log:
        async with Client(f"{args.url}/mcp") as client:
            await Agent(client, args, log).run(pool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--pool", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attempts", type=int, default=6, help="ideas drawn")
    parser.add_argument("--beats", type=int, default=3, help="heartbeats per claim")
    parser.add_argument("--work-s", type=float, default=0.3, help="seconds of 'work' before each heartbeat")
    parser.add_argument("--lease", type=float, default=10.0, help="each claim's lease_s")
    parser.add_argument(
        "--crash-at", type=int, default=0, help="die after the first heartbeat of this claim (0: never)"
    )
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
