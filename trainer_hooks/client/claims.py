"""A run's claim: ``plan_trial`` claims its idea on the ledger before the run spends on it.

A plan with a hypothesis is spooled as a claim (the ``plan`` op with a ``claim`` entry:
the owner, the run id unless named, and the lease), and the sender sends it to ``POST
/projects/{p}/claims`` with ``Idempotency-Key: <run_id>-plan``: the ledger records the
trial as ``running``, held by the owner, and names its near-duplicates (trials tried,
other owners' running claims) or, when the project refuses duplicate claims
(``duplicate_claims: refuse``), refuses it with a 409 naming the other claim and its
owner. Like every write it is spooled first, so a run whose ledger is down claims when
the ledger is back (the same key: a replay gets the same trial). Its answer goes into
the spool's ``claim`` meta (:class:`ClaimAnswer`; :meth:`LedgerClient.wait_claim
<trainer_hooks.client.client.LedgerClient.wait_claim>` waits for it).

What a claim cannot carry falls back to the plain running record of clients before
claims (``POST .../trials``, status ``running``), with a warning: a plan with no
hypothesis (a claim is compared by its words), one whose hypothesis the ledger finds no
words in (a 422 naming ``hypothesis``), and ``plan_trial(claim=False)``.

A claim is finished by its owner (``POST .../claims/{exp_id}/finish``). A finish that
finds its claim no longer running, held by this owner, is sent as the PATCH of clients
before claims (the run did finish; its result is data): the lease lapsed while the
ledger was unreachable (the trial is ``harness_abort``; a warning says so), or the
finish is a replay of one already delivered. A claim another owner holds is refused.

Values and the client's waiting side here (:class:`ClaimWaiting`); the sender
(:mod:`trainer_hooks.client.delivery`) sends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer_hooks.client.spool import Spool

__all__ = [
    "MAX_CLAIM_LEASE_S",
    "MIN_CLAIM_LEASE_S",
    "ClaimAnswer",
    "ClaimRefused",
    "ClaimWaiting",
    "check_lease",
    "claim_request",
]

#: a claim's own lease, in seconds (``lineage.domain``'s bounds: a contract test keeps them equal)
MIN_CLAIM_LEASE_S, MAX_CLAIM_LEASE_S = 10, 24 * 3600
#: plan entries that are not the claim route's (the plan's status is the claim's own)
_NOT_CLAIMED = ("claim", "status")


def check_lease(lease_s: float | None) -> float | None:
    """``lease_s`` if None or a number of seconds within the ledger's bounds; else ValueError."""
    if lease_s is None:
        return None
    if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)):
        raise ValueError(f"lease_s must be a number of seconds, got {lease_s!r}")
    if not MIN_CLAIM_LEASE_S <= lease_s <= MAX_CLAIM_LEASE_S:
        raise ValueError(
            f"lease_s must be from {MIN_CLAIM_LEASE_S} to {MAX_CLAIM_LEASE_S} seconds (10 s to 24 h), got {lease_s!r}"
        )
    return float(lease_s)


def claim_request(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The ``POST .../claims`` body of a spooled plan with a ``claim`` entry."""
    body = {name: value for name, value in plan.items() if name not in _NOT_CLAIMED}
    claim = plan["claim"]
    body["owner"] = claim["owner"]
    if claim.get("lease_s") is not None:
        body["lease_s"] = claim["lease_s"]
    return body


@dataclass(frozen=True)
class ClaimAnswer:
    """What the ledger answered to the plan's claim.

    ``claimed``: the trial is held as a claim by ``owner`` (False: planned as a plain
    running record, ``warnings`` say why); ``refused``: the project refused the claim as a
    duplicate of another owner's running claim (``existing``: that claim, ``detail``: the
    ledger's words), and nothing was stored. ``duplicates``: ``{"tried": [...],
    "running": [...]}``, the near-duplicates the ledger named."""

    exp_id: str | None
    owner: str
    claimed: bool
    refused: bool = False
    lease_s: float | None = None
    duplicates: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    detail: str = ""
    existing: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimAnswer:
        values: dict[str, Any] = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        values["warnings"] = tuple(data.get("warnings") or ())
        return cls(**values)

    @classmethod
    def of_claim(cls, answer: Mapping[str, Any], owner: str) -> ClaimAnswer:
        """From the ledger's ``ClaimOut``."""
        lease = answer.get("lease") or {}
        return cls(
            exp_id=answer["trial"]["exp_id"],
            owner=str(lease.get("owner") or owner),
            claimed=True,
            lease_s=lease.get("lease_s"),
            duplicates=answer.get("duplicates") or {},
            warnings=tuple(answer.get("warnings") or ()),
        )


class ClaimRefused(Exception):
    """The ledger refused the run's claim: another owner runs a close idea, and the project
    refuses duplicate claims. ``answer``: the refusal (:class:`ClaimAnswer`, ``existing``
    names the other claim and its owner)."""

    def __init__(self, answer: ClaimAnswer) -> None:
        self.answer = answer
        super().__init__(answer.detail or "the ledger refused the claim as a duplicate")


class ClaimWaiting:
    """The client's view of its claim (a mixin of
    :class:`~trainer_hooks.client.client.LedgerClient`, which sets the attributes)."""

    active: bool
    spool: Spool
    error: Exception | None
    _report: Any
    _send_wake: threading.Event
    #: the plan was spooled as a claim (a plain running record has no claim to wait for)
    _claiming: bool = False

    def _spool_buffer(self) -> None:  # the client's
        raise NotImplementedError

    @property
    def claim(self) -> ClaimAnswer | None:
        """The ledger's answer to the plan's claim (near-duplicates, a fallback, a refusal);
        None until it answered (or on a rank other than 0)."""
        if not self.active or self._report is not None:
            return None
        found = self.spool.get("claim")
        return ClaimAnswer.from_dict(json.loads(found)) if found else None

    def wait_claim(self, timeout: float = 30.0) -> ClaimAnswer | None:
        """Wait at most ``timeout`` seconds for the ledger's answer to the plan's claim:
        the answer, or None when the ledger has not answered by then (the claim stays
        spooled and is sent when it is back) or the plan made no claim. Raises :class:`ClaimRefused` when the
        project refused the claim as a duplicate of another owner's running claim: the
        run should not spend on this idea (what it logs stays in the spool)."""
        if not self.active or not self._claiming:
            return None
        self._spool_buffer()
        self._send_wake.set()
        deadline = time.monotonic() + timeout
        while True:
            answer = self.claim
            if answer is not None and answer.refused:
                raise ClaimRefused(answer)
            if answer is not None or self.error is not None or time.monotonic() >= deadline:
                return answer
            time.sleep(0.01)
