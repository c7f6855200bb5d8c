"""A launched side that says when it is ready: the ssh login's step before the protocol.

A remote login prints what its scripts print (a banner, a motd, a report) and may read stdin, so
the protocol cannot start at the first byte. The ssh target's script (see
:mod:`remote_acp.targets.ssh.loader`) reads itself from stdin (:attr:`ReadyMarker.opening`),
prints a per-session marker line once it is ready, and waits for a go-ahead line
(:attr:`ReadyMarker.reply`) before it starts the agent. :class:`ReadyMarker` is that exchange as
a :class:`~remote_acp.targets.launch.Prelude`; the connection runs it on the raw byte stream and
knows nothing of logins.

Like the protocol core, it does no I/O: :meth:`ReadyMarker.begin` gives one launch's
:class:`MarkerWatch`, which is fed what the launched side prints and says when it is ready (the
go-ahead to write first and the protocol bytes that followed the marker), or refused. What came
before the marker is kept, bounded: its last :data:`PRINTED_KEPT` bytes to quote in an error,
and, with a gate, its last :data:`GATED_OUTPUT_KEPT` bytes for the gate to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from ...errors import Cause, ErrorKind, RemoteAcpError
from ..launch import Ready

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["GATED_OUTPUT_KEPT", "PRINTED_KEPT", "MarkerWatch", "NotReadyReading", "ReadyMarker"]

PRINTED_KEPT: Final = 4096
"""Bytes printed before the marker kept to quote when it never comes."""
GATED_OUTPUT_KEPT: Final = 64 * 1024
"""Bytes printed before the ready marker that a ready gate sees (its last ones): room for a
report printed ahead of the marker, however noisy the login scripts before it."""


class NotReadyReading(Protocol):
    """A target's own reading of a marker that did not come within ``bound_ms``, or ``None``."""

    def __call__(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None: ...


@dataclass(frozen=True, slots=True)
class ReadyMarker:
    """Write :attr:`opening`; wait for the line :attr:`marker`; ask :attr:`gate`; write :attr:`reply`."""

    opening: bytes = field(repr=False)
    """Written to stdin first; nothing else goes out before the marker."""
    marker: bytes
    """The line (without its newline) the launched side prints once it is ready for the protocol."""
    reply: bytes = field(default=b"", repr=False)
    """Written first once the marker was seen: the launched side's go-ahead."""
    bound_ms: int = 0
    """How long the marker may take (``0``: the ``initialize`` bound)."""
    gate: Callable[[bytes], RemoteAcpError | None] | None = field(default=None, repr=False, compare=False)
    """Asked once the marker was seen, with what came before it (up to :data:`GATED_OUTPUT_KEPT`
    bytes): ``None`` lets the go-ahead go; an error refuses it, and the session's start fails
    with that error while the launched side, never given the go-ahead, starts nothing. It must
    not raise."""
    explain: NotReadyReading | None = field(default=None, repr=False, compare=False)
    """The target's own reading of a marker that did not come (ssh's: a connection that never
    completed, a login that hangs); without one, or when it returns ``None``, the generic one."""

    def begin(self) -> MarkerWatch:
        return MarkerWatch(self)

    def not_ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError:
        if self.explain is not None and (special := self.explain(bound_ms, stderr=stderr, printed=printed)) is not None:
            return special
        return RemoteAcpError(
            ErrorKind.RESPONSE_TIMEOUT,
            f"the remote side did not say it was ready within {bound_ms} ms: a login that hangs, or a "
            "login script (.bashrc, .profile, config.fish...) that reads standard input or starts "
            "another shell",
            detail=f"it printed: {printed}" if printed else "it printed nothing",
            cause=Cause.LOGIN_READS_STDIN,
        )


class MarkerWatch:
    """One launch's watch for the marker (see :class:`~remote_acp.targets.launch.PreludeState`)."""

    __slots__ = ("_gate", "_kept", "_line", "_pending", "_reply", "printed")

    def __init__(self, marker: ReadyMarker) -> None:
        self._line = marker.marker + b"\n"
        self._reply = marker.reply
        self._gate = marker.gate
        self._kept = GATED_OUTPUT_KEPT if marker.gate is not None else PRINTED_KEPT
        self._pending = bytearray()
        self.printed = b""
        """What the launched side printed before its marker (its last bytes, bounded)."""

    def feed(self, data: bytes) -> Ready | RemoteAcpError | None:
        pending = self._pending
        pending += data
        at = pending.find(self._line)
        if at < 0:
            # Keep a bounded tail: enough to find a marker split across reads, to quote, and
            # for the gate to read.
            if len(pending) > self._kept + len(self._line):
                del pending[: len(pending) - self._kept - len(self._line)]
            self.printed = bytes(pending[-PRINTED_KEPT:])
            return None
        before = bytes(pending[max(0, at - self._kept) : at])
        self.printed = before[-PRINTED_KEPT:]
        rest = bytes(pending[at + len(self._line) :])
        pending.clear()
        if self._gate is not None and (refusal := self._gate(before)) is not None:
            return refusal
        return Ready(self._reply, rest)
