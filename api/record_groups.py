"""RecordGroups: the single-trial records a server process has in hand at once, for one
project, go to the ledger together (:meth:`lineage.service.Ledger.record_group`).

A record request joins its project's queue and waits for its own outcome. While no
group of that project is being written, the first request starts one: it yields the
event loop a few turns (:data:`GATHER_TURNS`), so the requests already read join it,
then writes the queue (up to :data:`~lineage.service.group_commit.MAX_GROUP`) as one
transaction; whatever arrived meanwhile is the next group. A lone request is a group of
one, after a few idle turns of the loop. Under load, groups form by themselves (the
requests that arrive while a commit is under way), so the commit and the project lock
are paid once per group instead of once per trial.

Only scheduling lives here: the queue holds requests not yet written, never a
response's data; ids, parents and bests come from the database in the group's
transaction, so several processes on one database stay correct.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable

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

_Waiting = list[tuple[RecordRequest, "asyncio.Future[object]"]]


class RecordGroups:
    """One per app (per process): each project's waiting records."""

    def __init__(self, write: Callable[..., Awaitable[Any]]) -> None:
        #: runs a group's write where small writes run (``api.deps.WriteLanes.small``)
        self._write_in_lane = write
        self._waiting: dict[str, _Waiting] = {}
        self._writing: set[str] = set()

    async def record(self, ledger: Ledger, project: str, request: RecordRequest) -> RecordResult:
        """The request's outcome once its group is written; the ledger's refusal raised."""
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[object] = loop.create_future()
        self._waiting.setdefault(project, []).append((request, outcome))
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
            while waiting := self._waiting.pop(project, None):
                group, rest = waiting[:MAX_GROUP], waiting[MAX_GROUP:]
                if rest:  # first in the next group, before anything arriving meanwhile
                    self._waiting[project] = rest
                try:
                    outcomes = await self._write_in_lane(ledger.record_group, project, [req for req, _ in group])
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
