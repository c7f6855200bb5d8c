"""Everything the agent sends, routed: into the turn in flight, or queued for the next one.

The connection's reader task calls these methods synchronously; they record, answer through
the connection's write queue and return, never waiting. Events go to the turn in flight, or,
between turns, to a queue delivered after the next turn's ``session_started``. A request only a
person could answer either ends the turn in flight or is latched, so the next turn ends at once
without a prompt.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio

from ..events import Event, Malformed, Notification, SessionStarted, utc_now
from ..masking import mask_secrets
from ..protocol.jsonrpc import METHOD_NOT_FOUND, Request
from ..protocol.unattended import NOT_IMPLEMENTED, GatingNotice, answer_agent_request
from .turn import ActiveTurn, Ending

if TYPE_CHECKING:
    from ..logs import ContextLogger
    from ..protocol.jsonrpc import Malformed as MalformedLine
    from ..protocol.normalize import Normalizer
    from .connection import AgentConnection

__all__ = ["QUEUE_BOUND", "Inbox"]

QUEUE_BOUND = 10_000
"""Events kept between turns; an agent that keeps talking with no turn cannot grow memory."""


class Inbox:
    """The session's :class:`~remote_acp.session.connection.ConnectionHandler`."""

    def __init__(self, normalizer: Normalizer, log: ContextLogger, *, tool_servers_delivered: int = 0) -> None:
        self.normalizer = normalizer
        self.log = log
        self.conn: AgentConnection | None = None
        self.turn: ActiveTurn | None = None
        self.queued: deque[Event] = deque(maxlen=QUEUE_BOUND)
        """Events that arrived between turns (the newest :data:`QUEUE_BOUND` of them)."""
        self._overflowed = False
        self.latched: Ending | None = None
        """An ending decided between turns, for the next turn."""
        self.secrets: tuple[str, ...] = ()
        """Values masked in what the agent sent before it is quoted back (malformed lines)."""
        self._sink: deque[Event] = self.queued
        self._activity = anyio.Event()
        self._gating = GatingNotice(tool_servers_delivered)

    # -- routing ------------------------------------------------------------------------------

    def attach(self, turn: ActiveTurn, opening: list[Event]) -> None:
        """Make ``turn`` the one in flight: its events are the ``opening`` ones, then whatever
        arrived between turns, then what the agent sends from now on."""
        self.normalizer.flush(self.queued.append)
        self.turn = turn
        turn.sink.extend(opening)
        if self._overflowed:
            self._overflowed = False
            message = f"more than {QUEUE_BOUND} events arrived between turns; the oldest were dropped"
            self.log.warning(message)
            turn.sink.append(self._event(Malformed, message=message))
        turn.sink.extend(self.queued)
        self.queued.clear()
        self._sink = turn.sink

    def detach(self, *, give_back: bool = False) -> None:
        """No turn is in flight any more. ``give_back``: the turn never reached the runtime, so
        what it was handed (except its ``session_started``) waits for the next turn again."""
        turn, self.turn = self.turn, None
        self._sink = self.queued
        if give_back and turn is not None:
            kept = [e for e in turn.take() if not isinstance(e, SessionStarted)]
            self.queued.extendleft(reversed(kept))

    def next_activity(self) -> anyio.Event:
        """An event set when the agent next sends something."""
        if self._activity.is_set():
            self._activity = anyio.Event()
        return self._activity

    def end_turn_by(self, turn: ActiveTurn, ending: Ending) -> None:
        """Decide an induced ending: send ``session/cancel`` once and await the runtime's answer."""
        if turn.ending is not None:
            return
        turn.ending = ending
        if turn.prompt is not None and self.conn is not None and turn.cancel_sent_at is None:
            turn.cancel_sent_at = time.monotonic()
            self.conn.notify("session/cancel", {"sessionId": self.normalizer.session_id})
        turn.wake.set()

    def notice(self, message: str) -> None:
        self.normalizer.flush(self._sink.append)
        self._sink.append(self._event(Notification, message=message))

    def _event(self, kind: type[Notification] | type[Malformed], **fields: Any) -> Event:
        return kind(timestamp=utc_now(), pid=self.normalizer.pid, session_id=self.normalizer.session_id, **fields)

    def _end_for_person(self, what: str) -> None:
        ending = Ending.input_required(what)
        if self.turn is not None:
            self.end_turn_by(self.turn, ending)
        elif self.latched is None:
            self.latched = ending

    # -- the connection's callbacks -----------------------------------------------------------

    def on_update(self, params: Any) -> None:
        self.normalizer.on_update(params, self._sink.append)

    def on_notification(self, method: str, params: Any) -> None:
        self.log.debug("ignoring a notification this client does not handle", extra={"method": method})

    def on_request(self, request: Request) -> None:
        conn = self.conn
        assert conn is not None
        turn = self.turn
        reply = answer_agent_request(
            request.method, request.params, winding_down=turn is not None and turn.ending is not None
        )
        if reply.error is not None:
            conn.answer_error(request.id, METHOD_NOT_FOUND, reply.error)
            if reply.malformed is None and reply.notice is None:
                self.log.debug("answered an agent request with method not found", extra={"method": request.method})
        else:
            conn.answer(request.id, reply.result)
        if reply.notice is not None:
            self.notice(reply.notice)
        if reply.malformed is not None:
            self._sink.append(self._event(Malformed, message=NOT_IMPLEMENTED, detail=reply.malformed))
        if reply.refused and (gated := self._gating.on_refusal()) is not None:
            self.notice(gated)
            self.log.warning(gated)
        if reply.needs_person is not None:
            self._end_for_person(reply.needs_person)

    def on_malformed(self, malformed: MalformedLine) -> None:
        self.normalizer.flush(self._sink.append)
        self._sink.append(
            self._event(
                Malformed,
                message="received a line that could not be parsed as JSON-RPC",
                detail=f"{malformed.reason}: {mask_secrets(malformed.excerpt, self.secrets)}",
            )
        )

    def on_oversized(self) -> None:
        turn = self.turn
        if turn is not None and not (turn.prompt is not None and turn.prompt.done.is_set()):
            turn.oversized = True
        else:
            self._sink.append(
                self._event(Malformed, message="a line from the agent exceeded the connection's line bound")
            )

    def on_write_failed(self) -> None:
        if self.turn is not None and self.turn.write_failed_at is None:
            self.turn.write_failed_at = time.monotonic()

    def batch_done(self) -> None:
        self._activity.set()
        if self.turn is not None:
            self.turn.note_batch()
        elif len(self.queued) == QUEUE_BOUND:
            self._overflowed = True

    def on_lost(self) -> None:
        self.normalizer.flush(self._sink.append)
