"""How a session with a reattach window reaches its host: what names the session there, how a
connection is opened, and the errors of a link that cannot go on (see :mod:`.relayed_agent`)."""

from __future__ import annotations

import enum
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import anyio

from ...errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError
from ...masking import escape_control
from ..launch import Ready
from ..process.agent import PipeClosed
from .relay.host_check import NO_WINDOW_MARK
from .relay.link import refusal_error
from .relay.start import EXIT_NO_WINDOW

if TYPE_CHECKING:
    from ..launch import LaunchSpec
    from ..process.agent import AgentProcess

__all__ = [
    "ACK_BYTES",
    "ACK_S",
    "DETACH_WAIT_S",
    "END_WAIT_S",
    "HEADER_MAX",
    "MAX_ATTEMPTS",
    "Phase",
    "Relink",
    "SessionRef",
    "host_text",
    "login",
    "next_attempt_in",
    "parse_end",
    "protocol_error",
    "refusal",
    "retire",
    "window_over",
]

ACK_BYTES: Final = 16 * 1024
ACK_S: Final = 0.25
"""Output is acknowledged (to the last whole line) every this many bytes or seconds."""
HEADER_MAX: Final = 4096
"""A relay's header or refusal line is short: a longer one is not the relay's."""
END_WAIT_S: Final = 2.0
"""How long an ssh whose output ended gets to exit and report its status."""
DETACH_WAIT_S: Final = 2.0
"""How long a detaching controller's ssh gets to carry its last acknowledgement to the host."""
_END_LINE: Final = re.compile(rb"RA-END out=(\d+) rc=(\d*)\Z")
REASON_MAX: Final = 400
"""A host's words on why it refused are shown up to this many characters."""
MAX_ATTEMPTS: Final = 4
"""Reconnect attempts in flight at once at most (the oldest is ended for a new one)."""


def parse_end(line: bytes) -> tuple[int, int | None] | None:
    """The relay's end report (``RA-END out=N rc=R``): the output's last offset and the agent's
    exit status (``None`` when the relay did not learn it), or ``None`` for another line."""
    match = _END_LINE.match(line.rstrip(b"\r"))
    if match is None:
        return None
    return int(match[1]), int(match[2]) if match[2] else None


def next_attempt_in(down_s: float) -> float:
    """How long after an attempt the next one starts, ``down_s`` seconds into an outage: none
    while the first may simply be logging in, then often (a link that comes back is used within
    that long), then less often as the outage lasts (each attempt is an ssh started on this
    machine and a connection tried to the host)."""
    if down_s < 0.5:  # a login on a near host takes about 0.3 s
        return 0.5 - down_s
    if down_s < 10:
        return 0.25
    if down_s < 60:
        return 0.5
    return 2.0 if down_s < 600 else 10.0


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


async def refusal(proc: AgentProcess, line: bytes, relink: Relink, *, start: bool) -> RemoteAcpError:
    """The error for the relay's refusal ``line``, with the reason its exit status gives (and, for
    a host that keeps no window, the host check's own words: what it found, and the fix)."""
    with anyio.move_on_after(END_WAIT_S):
        await proc.exited.wait()
    code = proc.exit_status.code if proc.exit_status is not None else None
    said = ""
    if start and code == EXIT_NO_WINDOW:
        lines = [text for text in proc.stderr_tail.lines() if text.startswith(NO_WINDOW_MARK)]
        said = escape_control(lines[-1].removeprefix(NO_WINDOW_MARK).strip().strip('"')[:REASON_MAX]) if lines else ""
    return refusal_error(code, host_text(line), host=relink.host, start=start, reason=said)


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


async def login(proc: AgentProcess, spec: LaunchSpec) -> bytes | None:
    """Run a reconnect's attach login (``spec``'s prelude) on ``proc`` up to its ready marker: the
    bytes after it, or ``None`` when the login failed."""
    watch = spec.prelude.begin() if spec.prelude is not None else None
    try:
        await proc.write_stdin(spec.stdin_prefix)
        while watch is not None:
            data = await proc.read_stdout()
            if not data:
                return None
            step = watch.feed(data)
            if isinstance(step, Ready):
                return step.rest
            if isinstance(step, RemoteAcpError):
                return None
    except PipeClosed:
        return None
    return b""


async def retire(proc: AgentProcess, *, grace_s: float = 0.0) -> None:
    """End a connection's ssh (the session stays on the host). With ``grace_s``, its stdin is
    closed first and it gets that long to end on its own (the attach step ends at its input's
    end, after what was written before, such as a detach's acknowledgement, reached the host)."""
    with anyio.CancelScope(shield=True):
        proc.close_stdin()
        with anyio.move_on_after(grace_s):
            await proc.exited.wait()
        await proc.kill(bound_s=0.5)
        proc.close_stdout()
