"""Everything the agent sends, routed: into the turn in flight, or kept for the next one.

The connection's reader task calls these methods synchronously; they record, answer through
the connection's write queue and return, never waiting. Events go into the turn machine of the
turn in flight, or, between turns, into a queue bounded in events and bytes, delivered after the
next turn's ``session_started``. What changes a turn (a request only a person could answer, an
over-long or unreadable answer, a lost connection) is handed to the turn machine, which decides;
the inbox never sets a turn's state itself. A request only a person could answer between turns
is latched, so the next turn ends at once without a prompt.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..events import Event, LinkLost, LinkRestored, Notification, SessionStarted, utc_now
from ..protocol.jsonrpc import METHOD_NOT_FOUND, Request
from ..protocol.unattended import NOT_IMPLEMENTED, GatingNotice, answer_agent_request
from .filesystem import PATH_CAP
from .turn import Ending

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..logs import ContextLogger
    from ..protocol.jsonrpc import MalformedLine
    from ..protocol.normalize import Normalizer
    from .connection import AgentConnection, PendingCall
    from .filesystem import FileServer
    from .turn import TurnMachine

__all__ = ["QUEUE_BOUND", "QUEUE_BYTES", "Inbox"]

QUEUE_BOUND: Final = 10_000
"""Events kept between turns; an agent that keeps talking with no turn cannot grow memory."""
QUEUE_BYTES: Final = 8 * 1024 * 1024
"""Bytes of agent output kept for events between turns (the oldest events go first)."""

OVERSIZED_LINE: Final = "a line from the agent exceeded the connection's line bound"


class _Between:
    """The events that arrive between turns: the newest ones, bounded in count and bytes."""

    __slots__ = ("bytes", "dropped", "events", "sizes")

    def __init__(self) -> None:
        self.events: deque[Event] = deque()
        self.sizes: deque[int] = deque()
        self.bytes = 0
        self.dropped = 0

    def append(self, event: Event) -> None:
        size = _size(event)
        self.events.append(event)
        self.sizes.append(size)
        self.bytes += size
        while len(self.events) > QUEUE_BOUND or (self.bytes > QUEUE_BYTES and len(self.events) > 1):
            self.events.popleft()
            self.bytes -= self.sizes.popleft()
            self.dropped += 1

    def take(self) -> list[Event]:
        events = list(self.events)
        self.events.clear()
        self.sizes.clear()
        self.bytes = 0
        return events

    def give_back(self, events: list[Event]) -> None:
        for event in reversed(events):
            size = _size(event)
            self.events.appendleft(event)
            self.sizes.appendleft(size)
            self.bytes += size


def _size(event: Event) -> int:
    """Roughly what keeping ``event`` costs, in bytes (its text plus a fixed overhead)."""
    text = getattr(event, "delta", None) or ""
    return 200 + len(text) + len(getattr(event, "message", "")) + len(getattr(event, "detail", ""))


class Inbox:
    """The session's :class:`~remote_acp.session.connection.ConnectionHandler`.

    ``changed`` is called whenever something the session's oversight task acts on has changed (an
    induced ending to send a cancel for, a lost connection, a failed write).
    """

    def __init__(self, normalizer: Normalizer, log: ContextLogger, changed: Callable[[], None]) -> None:
        self.normalizer = normalizer
        self.log = log
        self._changed = changed
        self.conn: AgentConnection | None = None
        self.turn: TurnMachine | None = None
        self.prompt: PendingCall | None = None
        """The turn's ``session/prompt`` request, once sent."""
        self.between = _Between()
        self.latched: Ending | None = None
        """An ending decided between turns, for the next turn."""
        self._emit: Callable[[Event], None] = self.between.append
        self.link_down = False
        """The session's link is down and being restored (a reattach window's sessions only)."""
        self._activity = anyio.Event()
        self.turn_wake = anyio.Event()
        """Set when the turn in flight has something new for its caller."""
        self._gating = GatingNotice(0)  # no tool servers are delivered yet
        self._files: FileServer | None = None
        self._file_tasks: anyio.abc.TaskGroup | None = None

    def serve_files(self, server: FileServer, tg: anyio.abc.TaskGroup) -> None:
        """Answer the file methods ``server`` handles, each in a task of ``tg`` (the reader
        never waits on a disk)."""
        self._files, self._file_tasks = server, tg

    # -- routing ------------------------------------------------------------------------------

    def attach(self, turn: TurnMachine, opening: list[Event]) -> None:
        """Make ``turn`` the one in flight: its events are the ``opening`` ones, then whatever
        arrived between turns, then what the agent sends from now on."""
        self.normalizer.flush(self.between.append)
        self.turn = turn
        self.prompt = None
        self.turn_wake = anyio.Event()
        turn.events.extend(opening)
        turn.link_down = self.link_down
        if self.between.dropped:
            message = f"{self.between.dropped} events that arrived between turns were dropped (the oldest ones)"
            self.between.dropped = 0
            self.log.warning(message)
            self.normalizer.malformed(turn.events.append, message)
        turn.events.extend(self.between.take())
        self._emit = turn.events.append

    def detach(self, *, give_back: bool = False) -> None:
        """No turn is in flight any more. ``give_back``: the turn never reached the runtime, so
        what it was handed (except its ``session_started``) waits for the next turn again."""
        turn, self.turn, self.prompt = self.turn, None, None
        self._emit = self.between.append
        if give_back and turn is not None:
            self.between.give_back([e for e in turn.take_all() if not isinstance(e, SessionStarted)])
        if self.conn is not None:
            self.conn.resume_reading()

    def next_activity(self) -> anyio.Event:
        """An event set when the agent next sends something."""
        if self._activity.is_set():
            self._activity = anyio.Event()
        return self._activity

    def notice(self, message: str) -> None:
        self.normalizer.flush(self._emit)
        self._emit(self._event(Notification, message=message))

    # -- the link (a LinkWatcher: see remote_acp.targets.agent_end) ---------------------------

    def link_lost(self, reason: str) -> None:
        self.normalizer.flush(self._emit)
        self._emit(self._event(LinkLost, message=f"the link to the host was lost ({reason}); reconnecting"))
        self.link_down = True
        if self.turn is not None:
            self.turn.link_down = True
            self.turn_wake.set()
            self._changed()

    def link_restored(self, down_ms: int) -> None:
        self._emit(
            self._event(LinkRestored, message=f"the link to the host is back after {down_ms} ms", down_ms=down_ms)
        )
        self.link_down = False
        if self.turn is not None:
            self.turn.link_down = False
            self.turn.resumed(time.monotonic())  # the time without a link was not the agent's silence
            self.turn_wake.set()
            self._changed()

    def _event(self, kind: type[Event], **fields: Any) -> Event:
        return kind(timestamp=utc_now(), pid=self.normalizer.pid, session_id=self.normalizer.session_id, **fields)

    def _induce(self, ending: Ending) -> None:
        if self.turn is not None:
            self.turn.induce(ending)
            self._changed()

    def _end_for_person(self, what: str) -> None:
        ending = Ending.input_required(what)
        if self.turn is not None:
            self._induce(ending)
        elif self.latched is None:
            self.latched = ending

    def _answer_outstanding(self) -> bool:
        """Whether the turn in flight sent its prompt and has no answer yet."""
        return self.turn is not None and self.prompt is not None and not self.prompt.done.is_set()

    # -- the connection's callbacks -----------------------------------------------------------

    def paused(self) -> bool:
        turn = self.turn
        return turn is not None and turn.full

    def on_resumed(self) -> None:
        if self.turn is not None:
            self.turn.resumed(time.monotonic())

    def on_update(self, params: Any) -> None:
        self.normalizer.on_update(params, self._emit)

    def on_notification(self, method: str, params: Any) -> None:
        shown = self.normalizer.masker.quote(method, 100)
        self.log.debug("ignoring a notification this client does not handle", extra={"method": shown})

    def on_request(self, request: Request) -> None:
        conn = self.conn
        assert conn is not None  # set before the connection starts reading
        if self._files is not None and self._file_tasks is not None and self._files.handles(request.method):
            self._file_tasks.start_soon(self._serve_file, self._files, request, name="remote-acp file request")
            return
        turn = self.turn
        reply = answer_agent_request(
            request.method, request.params, winding_down=turn is not None and turn.ending is not None
        )
        if reply.error is not None:
            conn.answer_error(request.id, METHOD_NOT_FOUND, reply.error)
            if reply.malformed is None and reply.notice is None:
                self.log.debug(
                    "answered an agent request with method not found", extra={"method": request.method[:100]}
                )
        else:
            conn.answer(request.id, reply.result)
        if reply.notice is not None:
            self.notice(reply.notice)
        if reply.malformed is not None:
            self.normalizer.malformed(self._emit, NOT_IMPLEMENTED, reply.malformed)
        if reply.refused and (gated := self._gating.on_refusal()) is not None:
            self.notice(gated)
            self.log.warning(gated)
        if reply.needs_person is not None:
            self._end_for_person(reply.needs_person)

    async def _serve_file(self, files: FileServer, request: Request) -> None:
        outcome = await files.serve(request.method, request.params)
        conn = self.conn
        assert conn is not None
        if outcome.result is not None:
            conn.answer(request.id, outcome.result)
        else:
            conn.answer_error(request.id, outcome.code, outcome.message)
        if outcome.refusal is not None:
            shown = self.normalizer.masker.quote(outcome.path, PATH_CAP)
            message = f"refused {request.method} of '{shown}': {outcome.refusal}"
            self.notice(message)
            self.log.warning(message)
            if self.turn is not None:
                self.turn_wake.set()

    def on_malformed(self, malformed: MalformedLine) -> None:
        self.normalizer.flush(self._emit)
        self.normalizer.malformed(
            self._emit,
            "received a line that could not be parsed as JSON-RPC",
            f"{malformed.reason}: {malformed.excerpt}",
            detail_cut=malformed.cut,
        )

    def on_oversized(self, excerpt: bytes) -> None:
        if self._answer_outstanding() and self.turn is not None:
            # The over-long line came before the answer and may have been the answer itself.
            self.turn.on_unreadable_answer(OVERSIZED_LINE, answered=False)
            self._changed()
        else:
            self.normalizer.malformed(self._emit, OVERSIZED_LINE)

    def on_write_failed(self) -> None:
        if self.turn is not None:
            self.turn.on_write_failed(time.monotonic())
            self._changed()

    def on_write_started(self) -> None:
        if self.turn is not None:
            self._changed()  # the oversight task bounds how long the write may wait

    def batch_started(self) -> None:
        self.normalizer.batch_time = utc_now()

    def batch_done(self, nbytes: int) -> None:
        self.normalizer.batch_time = None
        self._activity.set()
        turn = self.turn
        if turn is not None:
            turn.note_batch(nbytes, time.monotonic())
            self.turn_wake.set()

    def on_lost(self) -> None:
        self.normalizer.flush(self._emit)
        if self.turn is not None:
            self.turn.on_lost()
            self._changed()
