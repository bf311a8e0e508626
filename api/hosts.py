"""The server's host allow-list: which ``Host`` and ``Origin`` a request may name (DNS
rebinding).

A web page whose name an attacker rebinds to 127.0.0.1 is same-origin with a ledger
listening there: without this check it could write to a quick-start ledger (no token,
open writes) and call its MCP tools. Such a request names the attacker's host in ``Host``
(and in ``Origin``), so the server answers only requests that name one of its own
hosts: the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``) always, the address
``lineage serve --host`` binds when it is a concrete one, and the names of
``LINEAGE_ALLOWED_HOSTS`` (``lineage serve --allowed-host``; comma-separated, each ``name``
for any port or ``name:port``; ``*`` allows every host). A loopback name is never a
rebinding: the attacker's page cannot be served from it.

:class:`HostGuard` (``api.middleware``) checks every request but ``/health`` (liveness
probes) for ``Host``, and the JSON API and ``/mcp`` for ``Origin`` too (the pages check
``Origin`` against ``Host`` for their forms, ``api.pages.access``); a refusal is a 403
problem naming :data:`SETTING`. The MCP SDK's own rebinding protection gets the same list
(:func:`mcp_transport_lists`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_HOSTS", "SETTING", "HostAllowList", "mcp_transport_lists"]

#: The environment variable (and ``Settings.allowed_hosts``) that names more hosts.
SETTING = "LINEAGE_ALLOWED_HOSTS"
#: Names every server answers to.
LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
_WILDCARD_BINDS = ("0.0.0.0", "::", "[::]", "")


def _split(authority: str) -> tuple[str, str | None]:
    """``(host, port)`` of ``host[:port]`` (an IPv6 host in brackets), lower-cased, a
    trailing dot dropped."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        host, rest = (authority[: end + 1], authority[end + 1 :]) if end > 0 else (authority, "")
        port = rest[1:] if rest.startswith(":") else None
    elif authority.count(":") == 1:
        host, port = authority.split(":")
    else:
        host, port = authority, None
    return host.rstrip("."), port or None


@dataclass(frozen=True, slots=True)
class HostAllowList:
    """The hosts a server answers to: each ``(host, port)``, ``port`` None for any."""

    entries: tuple[tuple[str, str | None], ...]
    any_host: bool = False

    @classmethod
    def build(cls, configured: str | Iterable[str] | None, *, bind_host: str | None = None) -> HostAllowList:
        """The loopback names, the bind address when it is a concrete one, and
        ``configured`` (comma-separated text or names)."""
        names = configured.split(",") if isinstance(configured, str) else list(configured or ())
        names = [name.strip() for name in names if name.strip()]
        if bind_host and bind_host.strip().lower() not in _WILDCARD_BINDS:
            bound = bind_host.strip()
            names.append(f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound)
        entries = [_split(name) for name in (*LOOPBACK_HOSTS, *names) if name != "*"]
        return cls(tuple(dict.fromkeys(entries)), any_host="*" in names)

    @property
    def names(self) -> tuple[str, ...]:
        """The entries as written (``name`` or ``name:port``)."""
        return tuple(host if port is None else f"{host}:{port}" for host, port in self.entries)

    def allows(self, authority: str | None) -> bool:
        """Whether a ``Host`` header's ``host[:port]`` is one of the list's."""
        if self.any_host:
            return True
        if not authority:
            return False
        host, port = _split(authority)
        return any(host == allowed and (allowed_port is None or port == allowed_port) for allowed, allowed_port in self)

    def allows_origin(self, origin: str | None) -> bool:
        """Whether an ``Origin`` header (absent: a same-origin or non-browser request) is
        an http(s) origin of one of the list's hosts."""
        if origin is None or self.any_host:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        return parts.scheme.lower() in ("http", "https") and self.allows(parts.netloc)

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        return iter(self.entries)

    def refusal(self, header: str, value: str | None) -> str:
        """The 403's detail: what was refused, what is allowed, and how to allow more."""
        return (
            f"{header} {value!r} is not one of this server's hosts ({', '.join(self.names)}); "
            f"a served deployment names its hosts in {SETTING} (lineage serve --allowed-host NAME)"
        )


def mcp_transport_lists(allowed: HostAllowList) -> tuple[bool, list[str], list[str]]:
    """``(enable, hosts, origins)`` for the MCP SDK's ``TransportSecuritySettings``: the
    same hosts in its notation (``name:*`` for any port)."""
    if allowed.any_host:
        return False, [], []
    hosts: list[str] = []
    origins: list[str] = []
    for host, port in allowed:
        for form in [host, f"{host}:*"] if port is None else [f"{host}:{port}"]:
            hosts.append(form)
            origins.extend((f"http://{form}", f"https://{form}"))
    return True, hosts, origins
