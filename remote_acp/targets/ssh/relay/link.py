"""The controller's side of a reattachable session's link, without I/O.

:class:`Link` keeps the two counts that make a reattach lose nothing and repeat nothing:

* output: the bytes the caller has had (``received``). The bytes after an attachment's header
  start at the offset the header names, so byte ``i`` after it has offset ``K + i``; bytes below
  ``received`` are dropped (the caller has them), the rest handed on and counted. Every
  :attr:`Link.ack_every` bytes the host is told (``A K``) so it may drop what it kept;
* input: every byte sent (``sent``), and the bytes not yet confirmed. The host confirms only when
  a connection attaches (``in=J'`` in the header: what it has), so the link keeps the last
  :data:`~.segments.DEFAULT_BOUND` bytes sent; what was lost in the cut connection is at most
  what its buffers held, and a reattach resends from ``J'``. A host that confirms less than the
  link still keeps is a loss: the link raises :class:`RemoteAcpError` rather than paper over it.

The I/O around it: open a connection running the attach step (or the start step), write
:meth:`Link.attach_request`, read the header line and give it to :meth:`Link.attached`, write
what that returns (the resend), then pass each chunk of output through :meth:`Link.received_bytes`
and write the frames :meth:`Link.send`, :meth:`Link.ack` and :meth:`Link.close_input` return. A
refusal (:data:`~.attach.REFUSED_MARK` and an exit status) becomes an error by :func:`refusal_error`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from remote_acp.errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError

from ..script import EXIT_AT_CAPACITY, EXIT_NO_SLOTS
from .attach import (
    ATTACHED_MARK,
    EXIT_ATTACHED_ELSEWHERE,
    EXIT_BAD_REQUEST,
    EXIT_NO_SESSION,
    EXIT_OFFSET_GONE,
    EXIT_WRONG_SECRET,
)
from .segments import DEFAULT_BOUND
from .start import EXIT_BAD_START, EXIT_NO_WINDOW

__all__ = ["AttachReply", "Link", "parse_attach_reply", "refusal_error"]

_REPLY = re.compile(rf"{ATTACHED_MARK} out=(\d+) in=(\d+)\Z")
_SESSION_ID = re.compile(r"[A-Za-z0-9]+\Z")
_SECRET = re.compile(r"[!-~]+\Z")  # printable ASCII without spaces: one word of the request line
DEFAULT_ACK_EVERY: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class AttachReply:
    """An attachment's header: the output offset its bytes start at, and the input the host has."""

    output_offset: int
    host_input: int


def parse_attach_reply(line: bytes | str) -> AttachReply:
    """The header line (without its newline).

    :raises ValueError: a line that is not a header (a refusal is read by :func:`refusal_error`).
    """
    text = line.decode("ascii", "replace") if isinstance(line, bytes) else line
    match = _REPLY.match(text.rstrip("\r\n"))
    if match is None:
        raise ValueError(f"not an attachment header: {text[:200]!r}")
    return AttachReply(int(match[1]), int(match[2]))


class Link:
    """The offsets of one session's link across its connections (see the module docstring).

    ``session_id``: letters and digits; ``secret``: one word of printable ASCII; ``input_bound``:
    the input kept for resending; ``ack_every``: output bytes between acknowledgements.
    """

    def __init__(
        self,
        session_id: str,
        secret: str,
        *,
        input_bound: int = DEFAULT_BOUND,
        ack_every: int = DEFAULT_ACK_EVERY,
    ) -> None:
        if not _SESSION_ID.match(session_id):
            raise ValueError("a session id is ASCII letters and digits")
        if not _SECRET.match(secret):
            raise ValueError("a secret is one word of printable ASCII")
        if input_bound < 1 or ack_every < 1:
            raise ValueError("the input bound and the ack interval must be at least 1")
        self.session_id = session_id
        self._secret = secret
        self.input_bound = input_bound
        self.ack_every = ack_every
        self.received = 0
        """Output bytes the caller has had (the offset of the next one)."""
        self.sent = 0
        """Input bytes given to :meth:`send`."""
        self.acked = 0
        """The highest output offset acknowledged to the host."""
        self._kept = bytearray()  # the last input bytes sent, up to the bound: offsets sent-len .. sent
        self._input_closed = False
        self._offset: int | None = None  # the offset of the next byte on the current connection

    # -- requests -------------------------------------------------------------------------------

    def start_request(self) -> bytes:
        """The start step's first line: ``ID SECRET``."""
        return f"{self.session_id} {self._secret}\n".encode()

    def attach_request(self, *, takeover: bool = True) -> bytes:
        """An attachment's request: ``ID K J MODE SECRET``. ``takeover``: the same controller
        reconnecting (an older connection still attached is ended); else refused while one is."""
        mode = "takeover" if takeover else "attach"
        return f"{self.session_id} {self.received} {self.sent} {mode} {self._secret}\n".encode()

    def resume_request(self) -> bytes:
        """A new controller's request (it has no counts): ``ID - - attach SECRET``, the output from
        what the host had acknowledged and the input from what the host has. Answered, the header
        goes to :meth:`resumed`."""
        return f"{self.session_id} - - attach {self._secret}\n".encode()

    def resumed(self, reply: AttachReply) -> None:
        """Take the header that answered :meth:`resume_request`: the counts start where the host's do."""
        if self.received or self.sent or self._kept:
            raise RuntimeError("a link that has counted bytes reattaches with attach_request")
        self.received = self.acked = reply.output_offset
        self.sent = reply.host_input
        self._offset = reply.output_offset

    def attached(self, reply: AttachReply) -> bytes:
        """Take a connection's header; return what to write first on it: the input the host does
        not have (one ``D`` frame) and, if the input was closed, ``E`` again.

        :raises RemoteAcpError: the host has more input than was sent, less than the link still
            keeps, or its output starts past what the caller has (a byte would be missing).
        """
        if reply.output_offset > self.received:
            raise _lost(f"the host's output starts at {reply.output_offset}, past the {self.received} bytes received")
        if reply.host_input > self.sent:
            raise _lost(f"the host has {reply.host_input} input bytes, more than the {self.sent} sent")
        oldest = self.sent - len(self._kept)
        if reply.host_input < oldest:
            raise _lost(f"the host has {reply.host_input} input bytes and the link keeps only those from {oldest} on")
        self._offset = reply.output_offset
        missing = bytes(self._kept[reply.host_input - oldest :])
        # what the host has needs no resending ever again
        del self._kept[: reply.host_input - oldest]
        frames = self._data_frame(missing) if missing else b""
        if self._input_closed:
            frames += b"E\n"
        return frames

    def detached(self) -> None:
        """The connection is gone: output that might still come from it must not be counted."""
        self._offset = None

    # -- output ---------------------------------------------------------------------------------

    def received_bytes(self, data: bytes) -> bytes:
        """The part of ``data`` (the next bytes after the header) the caller does not have yet.

        :raises RuntimeError: between connections (after :meth:`detached`, before :meth:`attached`).
        """
        if self._offset is None:
            raise RuntimeError("output with no connection attached")
        start = self._offset
        self._offset += len(data)
        if self._offset <= self.received:
            return b""
        fresh = data[max(0, self.received - start) :]
        self.received = self._offset
        return fresh

    def ack(self, *, upto: int | None = None, force: bool = False) -> bytes:
        """An ``A K`` frame when ``ack_every`` bytes came since the last one (or ``force``), else
        ``b""``. ``upto``: acknowledge only that far (the end of the last whole line: a new
        controller resumes from the acknowledged offset, and must start at a line)."""
        upto = self.received if upto is None else min(upto, self.received)
        if upto <= self.acked or (not force and upto - self.acked < self.ack_every):
            return b""
        self.acked = upto
        return b"A %d\n" % upto

    # -- input ----------------------------------------------------------------------------------

    def send(self, data: bytes) -> bytes:
        """The frame carrying ``data`` to the agent's stdin; ``data`` is kept for a resend.

        :raises RuntimeError: after :meth:`close_input`.
        """
        if self._input_closed:
            raise RuntimeError("the agent's input is closed")
        self.sent += len(data)
        self._kept += data
        if len(self._kept) > self.input_bound:
            del self._kept[: len(self._kept) - self.input_bound]
        return self._data_frame(data) if data else b""

    def close_input(self) -> bytes:
        """The frame that closes the agent's stdin (sent again after a reattach)."""
        self._input_closed = True
        return b"E\n"

    @staticmethod
    def end_session() -> bytes:
        """The frame that ends the session now: the host ends the agent's tree, and the rest of its
        output still comes (the controller is closing the session)."""
        return b"X\n"

    @property
    def unconfirmed(self) -> int:
        """Input bytes kept for a resend."""
        return len(self._kept)

    @staticmethod
    def _data_frame(data: bytes) -> bytes:
        return b"D %d\n" % len(data) + data


def _lost(message: str) -> RemoteAcpError:
    return RemoteAcpError(
        ErrorKind.PORT_EXIT, f"the session cannot be resumed without a loss: {message}", cause=Cause.OFFSET_LOST
    )


# The two steps' codes overlap (the start step keeps the session script's 93 and 94), so each has its table.
_ATTACH_REFUSALS: Final[dict[int, tuple[Cause, str]]] = {
    EXIT_NO_SESSION: (Cause.SESSION_EXPIRED, "the detached session is gone (its window expired, or it ended)"),
    EXIT_WRONG_SECRET: (Cause.NOT_OWNER, "the session's secret does not match: it is not this controller's"),
    EXIT_ATTACHED_ELSEWHERE: (Cause.ATTACHED_ELSEWHERE, "the session is attached to another controller"),
    EXIT_OFFSET_GONE: (Cause.OFFSET_LOST, "the host no longer keeps the session's bytes from the offsets asked for"),
    EXIT_BAD_REQUEST: (Cause.PROTOCOL_VIOLATION, "the host refused the attach request"),
}
_START_REFUSALS: Final[dict[int, tuple[Cause, str]]] = {
    EXIT_NO_WINDOW: (Cause.NO_REATTACH_WINDOW, "this host ends what a login leaves behind: no reattach window"),
    EXIT_AT_CAPACITY: (Cause.AT_CAPACITY, "the host is at capacity: every agent slot is held"),
    EXIT_NO_SLOTS: (Cause.SLOTS_UNUSABLE, "the agent slots directory is not usable"),
    EXIT_BAD_START: (Cause.PROTOCOL_VIOLATION, "the host refused to start the session"),
}


def refusal_error(
    exit_status: int | None, text: str, *, host: str | None = None, start: bool = False, reason: str = ""
) -> RemoteAcpError:
    """The error for an attach step (or, with ``start``, a start step) that ended with
    ``exit_status`` and printed ``text`` (its refusal line, masked by the caller); ``reason``: what
    the host said of why, when it did (a start refused for want of a window), shown after the message."""
    table = _START_REFUSALS if start else _ATTACH_REFUSALS
    known = table.get(exit_status) if exit_status is not None else None
    facts = ErrorFacts(host=host, exit_status=exit_status)
    if known is None:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT, "the link to the detached session failed", detail=text.strip(), facts=facts
        )
    cause, message = known
    if reason:
        message = f"{message} ({reason})"
    return RemoteAcpError(ErrorKind.PORT_EXIT, message, detail=text.strip(), cause=cause, facts=facts)
