"""One prompt turn: its state, how it can end, and the result a caller gets.

The state is shared by two parties: the connection's reader task (through the session) adds
events and records what the agent did; the caller's task drives the turn (waits, applies the
bounds, decides the ending). A turn ends exactly once, with one terminal event.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..errors import ErrorKind, RemoteAcpError
from ..events import Event, TurnCancelled, TurnEnded, TurnFailed, TurnInputRequired, TurnTimedOut

if TYPE_CHECKING:
    from types import TracebackType

    from .connection import PendingCall

__all__ = ["ActiveTurn", "Ending", "TurnDriver", "TurnResult", "TurnStream"]


@dataclass(frozen=True, slots=True)
class Ending:
    """An ending the client induced; it overrides whatever stop reason the agent then sends."""

    event: type[TurnEnded]
    kind: ErrorKind
    message: str

    @classmethod
    def cancelled(cls) -> Ending:
        return cls(TurnCancelled, ErrorKind.TURN_CANCELLED, "the turn was cancelled")

    @classmethod
    def timed_out(cls, bound_ms: int) -> Ending:
        return cls(TurnTimedOut, ErrorKind.TURN_TIMEOUT, f"the turn ran past turn_timeout_ms ({bound_ms} ms)")

    @classmethod
    def stalled(cls, bound_ms: int) -> Ending:
        return cls(
            TurnCancelled,
            ErrorKind.TURN_CANCELLED,
            f"the turn was cancelled after no event for stall_timeout_ms ({bound_ms} ms)",
        )

    @classmethod
    def outcome_unknown(cls, why: str) -> Ending:
        return cls(TurnFailed, ErrorKind.TURN_OUTCOME_UNKNOWN, why)

    @classmethod
    def input_required(cls, what: str) -> Ending:
        return cls(
            TurnInputRequired,
            ErrorKind.TURN_INPUT_REQUIRED,
            f"agent asked for a decision only a person can make: {what}",
        )


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended. ``error`` is ``None`` exactly when the turn completed."""

    session_id: str
    outcome: str
    """The terminal event's type: turn_completed, turn_failed, turn_cancelled, turn_timed_out or
    turn_input_required."""
    message: str
    error: RemoteAcpError | None
    stop_reason: str | None
    last_message: str

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_kind(self) -> ErrorKind | None:
        return self.error.kind if self.error is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "turn_result",
            "session_id": self.session_id,
            "outcome": self.outcome,
            "error_kind": self.error.kind.value if self.error else None,
            "retryable": self.error.retryable if self.error else False,
            "message": self.message,
            "stop_reason": self.stop_reason,
            "last_message": self.last_message,
        }


class ActiveTurn:
    """Mutable state of the turn in flight."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sink: deque[Event] = deque()
        self.wake = anyio.Event()
        self.prompt: PendingCall | None = None
        self.started_at = time.monotonic()
        self.last_event_at = self.started_at
        self.ending: Ending | None = None
        """An induced ending, once one is decided (then ``session/cancel`` has been sent)."""
        self.cancel_sent_at: float | None = None
        self.caller_cancelled = False
        self.oversized = False
        self.write_failed_at: float | None = None
        self.result: TurnResult | None = None
        self._seen = 0

    def note_batch(self) -> None:
        """Called once per reader batch: record activity and wake the driver."""
        if len(self.sink) != self._seen:
            self._seen = len(self.sink)
            self.last_event_at = time.monotonic()
        self.wake.set()

    def take(self) -> list[Event]:
        events = list(self.sink)
        self.sink.clear()
        self._seen = 0
        return events


class TurnDriver(Protocol):
    """What a :class:`TurnStream` needs from its session."""

    async def _accept(self, turn: ActiveTurn) -> None: ...
    async def _advance(self, turn: ActiveTurn) -> list[Event]: ...
    async def _abort(self, turn: ActiveTurn) -> None: ...


class TurnStream:
    """One turn: an async context manager that is also an async iterator of events.

    Leaving the block before the turn ended (a ``break``, an exception, a cancelled task)
    cancels the turn and waits, bounded by ``read_timeout_ms``, for the runtime to settle it,
    so the session is never left with a turn in flight that nobody waits for.
    """

    def __init__(self, driver: TurnDriver, text: str) -> None:
        self._session = driver
        self._turn = ActiveTurn(text)
        self._buffer: deque[Event] = deque()

    @property
    def result(self) -> TurnResult | None:
        """How the turn ended; ``None`` until it has."""
        return self._turn.result

    def cancel(self) -> None:
        if self._turn.result is None:
            self._turn.caller_cancelled = True
            self._turn.wake.set()

    async def __aenter__(self) -> TurnStream:
        await self._session._accept(self._turn)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._turn.result is None:
            await self._session._abort(self._turn)

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> Event:
        while not self._buffer:
            if self._turn.result is not None:
                raise StopAsyncIteration
            self._buffer.extend(await self._session._advance(self._turn))
        return self._buffer.popleft()
