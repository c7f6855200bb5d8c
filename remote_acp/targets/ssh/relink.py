"""How a session with a reattach window reaches its host: what names the session there, how a
connection is opened, and the errors of a link that cannot go on (see :mod:`.relayed_agent`)."""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ...errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError

if TYPE_CHECKING:
    from ..launch import LaunchSpec

__all__ = [
    "BACKOFF_S",
    "Phase",
    "Relink",
    "SessionRef",
    "host_text",
    "protocol_error",
    "window_over",
]

BACKOFF_S: Final = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Waits between reconnect attempts (the last repeats), always within the window."""


class Phase(enum.Enum):
    """Where a relayed agent's current connection stands."""

    PRELUDE = "prelude"  # the first connection, before its ready marker: raw bytes
    HEADER = "header"  # waiting for the relay's header (or refusal)
    LIVE = "live"
    DOWN = "down"  # reconnecting
    DONE = "done"


@dataclass(frozen=True, slots=True)
class SessionRef:
    """What names a detached session on its host and proves it is ours."""

    relay_id: str
    secret: str = field(repr=False)

    @classmethod
    def new(cls) -> SessionRef:
        return cls(secrets.token_hex(12), secrets.token_urlsafe(24))


@dataclass(frozen=True, slots=True)
class Relink:
    """How a session's connections are opened (the ssh target builds it)."""

    spec: LaunchSpec
    """A reconnect: the session's ssh, the attach login on stdin (its prelude, a :class:`ReadyMarker`)."""
    marker: bytes
    """The ready marker both logins print."""
    go_ahead: bytes
    """The reply to the marker (the session's connection writes it on the first connection)."""
    window_s: int
    destination: str
    """The ssh destination as the target was given it (``host`` is its label, for people)."""
    config_file: str | None
    attempt_s: float
    """One reconnect's bound: the connection, the login, the marker and the header."""
    host: str


def host_text(line: bytes) -> str:
    """A line from the host, as a person may see it: printable ASCII, bounded."""
    text = "".join(c if " " <= c <= "~" else "?" for c in line[:200].decode("ascii", "replace"))
    return repr(text)


def protocol_error(message: str) -> RemoteAcpError:
    return RemoteAcpError(ErrorKind.PORT_EXIT, message, cause=Cause.PROTOCOL_VIOLATION)


def window_over(relink: Relink, *, closing: bool) -> RemoteAcpError:
    if closing:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            "the session was closed while its link was down: the host ends it when its window runs out",
            cause=Cause.LINK_LOST,
            facts=ErrorFacts(host=relink.host),
        )
    return RemoteAcpError(
        ErrorKind.PORT_EXIT,
        f"the link to {relink.host} stayed down for the whole reattach window ({relink.window_s} s)",
        cause=Cause.LINK_LOST,
        facts=ErrorFacts(host=relink.host),
    )
