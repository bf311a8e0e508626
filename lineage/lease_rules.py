"""The running state's lease rules: how long a running trial lives without a heartbeat
(the project's lease, or a claim's own ``lease_s``, each bounded), the note it gets when
the lease lapses, and :class:`Lease`, a running trial as the faces list it.

Pure Python, like :mod:`lineage.domain`, which re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lineage.errors import InvalidInput


class _WithSettings(Protocol):
    """What :func:`lease_of` reads of a project (``lineage.domain.Project``)."""

    @property
    def settings(self) -> Mapping[str, Any] | None: ...


#: How long a running trial stays running without a heartbeat, in seconds, unless its
#: project's setting :data:`LEASE_SETTING` says otherwise.
DEFAULT_LEASE_S = 600
#: The project setting (``project.settings``) of its lease, in seconds.
LEASE_SETTING = "running_lease_s"
MIN_LEASE_S, MAX_LEASE_S = 10, 7 * 24 * 3600


def check_lease(value: object) -> float:
    """``value`` if it is a lease length: a number of seconds from MIN_LEASE_S to MAX_LEASE_S."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_LEASE_S <= value <= MAX_LEASE_S:
        raise InvalidInput(LEASE_SETTING, f"must be a number of seconds from {MIN_LEASE_S} to {MAX_LEASE_S}")
    return float(value)


def lease_of(project: _WithSettings) -> float:
    """The project's lease in seconds (:data:`LEASE_SETTING`, else :data:`DEFAULT_LEASE_S`)."""
    value = project.settings.get(LEASE_SETTING) if project.settings else None
    return DEFAULT_LEASE_S if value is None else check_lease(value)


#: A claim's own lease (``lease_s``) in seconds, as Consul bounds a session's TTL: under
#: 10 s a busy agent's heartbeats would miss it; over 24 h a crashed agent would hold its
#: idea for days (a longer run keeps a shorter lease with heartbeats).
MIN_CLAIM_LEASE_S, MAX_CLAIM_LEASE_S = 10, 24 * 3600
CLAIM_LEASE_FIELD = "lease_s"


def check_claim_lease(value: object) -> float | None:
    """A claim's ``lease_s``: None (the project's lease) or a number of seconds from
    :data:`MIN_CLAIM_LEASE_S` to :data:`MAX_CLAIM_LEASE_S`; outside them an error naming
    the field and the bounds (refused, not clamped: a caller learns its heartbeat period
    is wrong before its claim lapses)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or not MIN_CLAIM_LEASE_S <= value <= MAX_CLAIM_LEASE_S
    ):
        raise InvalidInput(
            CLAIM_LEASE_FIELD,
            f"must be a number of seconds from {MIN_CLAIM_LEASE_S} to {MAX_CLAIM_LEASE_S} (10 s to 24 h), "
            f"got {value!r}; heartbeat more often than the lease, or leave it out for the project's lease",
        )
    return float(value)


def lapse_note(last_sign: str | None, lease_s: float) -> str:
    """The note a running trial gets when its lease lapses and it becomes ``harness_abort``."""
    return f"lease lapsed: no heartbeat since {last_sign or 'it started'} (lease {lease_s:g} s)"


@dataclass(frozen=True, slots=True)
class Lease:
    """A running trial as the faces list it: who holds it, since when, its last heartbeat
    (None: none yet) and what it tries."""

    exp_id: str
    owner: str
    since: str | None
    heartbeat_at: str | None
    hypothesis: str = ""
    specialist: str = ""
    #: the lease's length in seconds (the claim's own, else the project's) and when it
    #: lapses without another heartbeat
    lease_s: float | None = None
    expires_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "exp_id": self.exp_id,
            "owner": self.owner,
            "since": self.since,
            "heartbeat_at": self.heartbeat_at,
            "hypothesis": self.hypothesis,
            "specialist": self.specialist,
            "lease_s": self.lease_s,
            "expires_at": self.expires_at,
        }
