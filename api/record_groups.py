"""RecordGroups: the single-trial records a server process has in hand at once, for one
project, go to the ledger together (:meth:`lineage.service.ledger.recording.record_group`).

A record request joins its project's queue and waits for its own outcome. While no
group of that project is being written, the first request starts one: it yields the
event loop a few turns (:data:`GATHER_TURNS`), so the requests already read join it,
then writes the queue (up to :data:`~lineage.service.group_commit.MAX_GROUP`) as one
transaction; whatever arrived meanwhile is the next group. A lone request is a group of
one, after a few idle turns of the loop. Under load, groups form by themselves (the
requests that arrive while a commit is under way), so the commit and the project lock
are paid once per group instead of once per trial.

Writers in a tight loop (agents and scripts recording one trial after another over
kept-alive connections) would otherwise split into alternating groups: the requests
that arrived during a write form the next group, while the writers just answered are
still sending. So a group also waits, at most :data:`PEER_WAIT_S`, until it holds as
many requests as there are such writers: connections that sent a record of the project
within :data:`PEER_WINDOW_S` and had sent one before (a connection used once, as by a
client without keep-alive, is never waited for). This is PostgreSQL's
``commit_delay``/``commit_siblings`` idea: on PostgreSQL a group's fixed cost is its
round trips (about five), so four agents' records in groups of four instead of 1-3
are ~15% more trials/s at ~15% less CPU a trial; on SQLite it is neutral. A lone writer
never waits; a writer that stops after a burst costs the next group at most the wait.

Only scheduling lives here: the queue holds requests not yet written, never a
response's data; ids, parents and bests come from the database in the group's
transaction, so several processes on one database stay correct.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from lineage.domain import RecordResult
from lineage.service.group_commit import MAX_GROUP, RecordRequest

if TYPE_CHECKING:
    from lineage.service import Ledger

#: Turns of the event loop a new group waits before it is written. A request whose bytes
#: have arrived takes about three turns to reach the queue (the socket's read, its task's
#: start, the body's receive and validation); waiting four lets the requests already on
#: the wire join (with 4 agents: groups of 4 instead of 1-3, +15% trials/s). A lone
#: request waits four empty turns, some tens of microseconds.
GATHER_TURNS = 4
#: The longest a group waits for the project's other recent writers (module doc), seconds.
PEER_WAIT_S = 0.002
#: A connection is a recent writer of a project this long after its last record, seconds.
PEER_WINDOW_S = 0.02

_Waiting = list[tuple[RecordRequest, "asyncio.Future[object]"]]


class RecordGroups:
    """One per app (per process): each project's waiting records."""

    def __init__(
        self,
        write: Callable[..., Awaitable[Any]],
        *,
        peer_wait_s: float = PEER_WAIT_S,
        peer_window_s: float = PEER_WINDOW_S,
    ) -> None:
        #: runs a group's write where small writes run (``api.deps.WriteLanes.small``)
        self._write_in_lane = write
        self._waiting: dict[str, _Waiting] = {}
        self._writing: set[str] = set()
        self._peer_wait_s, self._peer_window_s = peer_wait_s, peer_window_s
        #: per project: a connection -> (when it last sent a record, how many it sent)
        self._writers: dict[str, dict[Any, tuple[float, int]]] = {}
        #: per project: set when a record arrives while a group waits for its writers
        self._arrived: dict[str, asyncio.Event] = {}

    async def record(self, ledger: Ledger, project: str, request: RecordRequest, writer: Any = None) -> RecordResult:
        """The request's outcome once its group is written; the ledger's refusal raised.
        ``writer``: the connection it came on (ASGI's ``client``), None when unknown."""
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[object] = loop.create_future()
        self._waiting.setdefault(project, []).append((request, outcome))
        if writer is not None:
            writers = self._writers.setdefault(project, {})
            writers[writer] = (loop.time(), writers.get(writer, (0.0, 0))[1] + 1)
            arrived = self._arrived.get(project)
            if arrived is not None:
                arrived.set()
        if project not in self._writing:
            self._writing.add(project)
            loop.create_task(self._write(ledger, project))
        # shielded: a client that goes away does not cancel a record others share a commit with
        result = await asyncio.shield(outcome)
        if isinstance(result, Exception):  # the ledger's refusal, or the database's error alone
            raise result
        assert isinstance(result, RecordResult)
        return result

    async def _write(self, ledger: Ledger, project: str) -> None:
        try:
            for _ in range(GATHER_TURNS):  # the requests already read reach the queue meanwhile
                await asyncio.sleep(0)
            while True:
                await self._peers(project)
                waiting = self._waiting.pop(project, None)
                if not waiting:
                    break
                group, rest = waiting[:MAX_GROUP], waiting[MAX_GROUP:]
                if rest:  # first in the next group, before anything arriving meanwhile
                    self._waiting[project] = rest
                try:
                    outcomes = await self._write_in_lane(
                        ledger.recording.record_group, project, [req for req, _ in group]
                    )
                except Exception as error:  # not the ledger's refusal: each request gets it
                    for _, future in group:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(group, outcomes):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._writing.discard(project)

    async def _peers(self, project: str) -> None:
        """Wait, at most ``peer_wait_s``, until the queue holds as many records as the
        project has recent writers (module doc)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._peer_wait_s
        while self._waiting.get(project) and (now := loop.time()) < deadline:
            if len(self._waiting[project]) >= min(self._recent_writers(project, now), MAX_GROUP):
                break
            arrived = self._arrived[project] = asyncio.Event()
            try:
                await asyncio.wait_for(arrived.wait(), deadline - now)
            except TimeoutError:
                break
            finally:
                self._arrived.pop(project, None)

    def _recent_writers(self, project: str, now: float) -> int:
        """The project's connections that sent a record within the window, and one before."""
        writers = self._writers.get(project)
        if not writers:
            return 0
        for gone in [writer for writer, (seen, _) in writers.items() if now - seen > self._peer_window_s]:
            del writers[gone]
        return sum(1 for _, sent in writers.values() if sent > 1)
