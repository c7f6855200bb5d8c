"""One prompt turn as a state machine without I/O, and the stream a caller iterates.

Theory of operation: :class:`TurnMachine` owns everything a turn is: the events not yet handed
to the caller, the time of the last one, the ending the client induced (cancel, timeout, stall,
a request only a person can answer), and the result. It is fed what happened (events, the
prompt's answer, a lost connection, an over-long line) and the time, and it answers two
questions for whoever drives it: when is the next bound due (:meth:`TurnMachine.next_deadline`)
and does the runtime need a ``session/cancel`` now (:meth:`TurnMachine.take_cancel`). It never
waits, never sends, never reads a clock; so every rule of a turn is tested without processes.

The buffer between the agent and the caller is bounded. While a turn runs, the session stops
reading the agent once :attr:`TurnMachine.full` says so, which pushes back on the agent through
its stdout pipe; reading resumes when the caller has taken everything. The bounds do not wait
for the caller: the session's oversight task applies them on time, and the terminal event goes in
after whatever the caller has not taken yet. Once an ending is decided the session must read on
to find the runtime's answer, so the events that no longer fit are dropped and counted.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from ..errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError
from ..events import (
    Event,
    Malformed,
    TurnCancelled,
    TurnEnded,
    TurnFailed,
    TurnInputRequired,
    TurnNotStarted,
    TurnTimedOut,
    utc_now,
)
from ..protocol.disposition import disposition_for_stop_reason, shown_stop_reason
from ..protocol.rpc_failure import call_error

if TYPE_CHECKING:
    from ..masking import Masker
    from ..protocol.jsonrpc import RpcErrorBody

__all__ = [
    "MAX_BUFFERED_BYTES",
    "MAX_BUFFERED_EVENTS",
    "Ending",
    "Outcome",
    "TurnBounds",
    "TurnMachine",
    "TurnResult",
    "not_started",
]

MAX_BUFFERED_EVENTS: Final = 4096
"""Events held for a caller that has not taken them before the session stops reading."""
MAX_BUFFERED_BYTES: Final = 8 * 1024 * 1024
"""Bytes read from the agent for events the caller has not taken, before the session stops
reading (one line may exceed it; it is then the last read until the caller catches up)."""

Outcome = Literal[
    "turn_completed",
    "turn_failed",
    "turn_cancelled",
    "turn_timed_out",
    "turn_input_required",
    "turn_not_started",
]


@dataclass(frozen=True, slots=True)
class Ending:
    """An ending the client induced; it overrides whatever stop reason the agent then sends.

    ``cause``: why, when the kind's commonest cause is not it (a stall is the seeds'
    ``turn_cancelled``, but nobody cancelled it). ``bound_ms``: the bound that decided it.
    """

    event: type[TurnEnded]
    kind: ErrorKind
    message: str
    cause: Cause | None = None
    bound_ms: int | None = None

    def error(self) -> RemoteAcpError:
        return RemoteAcpError(self.kind, self.message, cause=self.cause, facts=ErrorFacts(bound_ms=self.bound_ms))

    @classmethod
    def cancelled(cls, why: str = "the turn was cancelled") -> Ending:
        return cls(TurnCancelled, ErrorKind.TURN_CANCELLED, why, Cause.CANCELLED)

    @classmethod
    def timed_out(cls, bound_ms: int) -> Ending:
        return cls(
            TurnTimedOut,
            ErrorKind.TURN_TIMEOUT,
            f"the turn ran past turn_timeout_ms ({bound_ms} ms)",
            Cause.TURN_DEADLINE,
            bound_ms,
        )

    @classmethod
    def stalled(cls, bound_ms: int) -> Ending:
        # The seeds' kind, with its own cause: the runtime was sent a cancel only to end the turn.
        return cls(
            TurnCancelled,
            ErrorKind.TURN_CANCELLED,
            f"the turn stalled: the agent sent nothing for stall_timeout_ms ({bound_ms} ms)",
            Cause.STALLED,
            bound_ms,
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

    @classmethod
    def port_exit(cls, why: str) -> Ending:
        return cls(TurnFailed, ErrorKind.PORT_EXIT, why)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended. ``error`` is ``None`` exactly when the turn completed."""

    session_id: str
    outcome: Outcome
    """The terminal event's type; ``turn_not_started`` when the prompt never reached the agent."""
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

    @property
    def cause(self) -> Cause | None:
        """Why the turn failed (``None`` when it completed)."""
        return self.error.cause if self.error is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "turn_result",
            "session_id": self.session_id,
            "outcome": self.outcome,
            "error_kind": self.error.kind.value if self.error else None,
            "cause": self.error.cause.value if self.error else None,
            "retryable": self.error.retryable if self.error else False,
            "message": self.message,
            "stop_reason": self.stop_reason,
            "last_message": self.last_message,
        }


@dataclass(frozen=True, slots=True)
class TurnBounds:
    """The turn's time bounds, in seconds (``stall_s <= 0`` disables the stall bound)."""

    turn_s: float
    stall_s: float
    read_s: float
    turn_ms: int
    stall_ms: int


class TurnMachine:
    """The state of one turn, from acceptance to its one terminal event.

    ``session_id`` and ``pid`` label the events it creates; ``now`` is a monotonic time.
    """

    def __init__(self, text: str, bounds: TurnBounds, *, now: float, session_id: str, pid: int | None) -> None:
        self.text = text
        self.bounds = bounds
        self.session_id = session_id
        self.pid = pid
        self.events: deque[Event] = deque()
        """Events not yet taken by the caller, in order; the terminal one is last."""
        self.buffered_bytes = 0
        self.dropped = 0
        """Events dropped because the caller had not taken earlier ones when the turn was ending."""
        self.started_at = now
        self.last_event_at = now
        self.link_down = False
        """No link to the agent's host, being restored: silence now is not the agent's stall."""
        self.ending: Ending | None = None
        self.prompt_sent = False
        self.cancel_sent_at: float | None = None
        self._cancel_due = False
        self.write_failed_at: float | None = None
        self._answered = False  # the prompt's answer arrived, readable or not
        self.lost = False
        """The connection ended: the session finishes the turn once it knows the exit status."""
        self.result: TurnResult | None = None
        self._seen = 0

    # -- what the agent sent ------------------------------------------------------------------

    @property
    def full(self) -> bool:
        """Whether the session should stop reading the agent until the caller catches up."""
        return self.ending is None and (
            len(self.events) >= MAX_BUFFERED_EVENTS or self.buffered_bytes >= MAX_BUFFERED_BYTES
        )

    def note_batch(self, nbytes: int, now: float) -> None:
        """One read of ``nbytes`` was dispatched (its events were appended to :attr:`events`)."""
        if self.result is not None:
            return
        if len(self.events) != self._seen:
            self.last_event_at = now
        self.buffered_bytes += nbytes
        if self.ending is not None and len(self.events) > MAX_BUFFERED_EVENTS:
            # Ending: reading goes on to find the runtime's answer; what no longer fits is dropped.
            while len(self.events) > MAX_BUFFERED_EVENTS:
                self.events.pop()
                self.dropped += 1
        self._seen = len(self.events)

    def take_all(self) -> list[Event]:
        """Every event the caller has not taken yet, in order (the buffer is then empty)."""
        events = list(self.events)
        self.events.clear()
        self.buffered_bytes = 0
        self._seen = 0
        return events

    def resumed(self, now: float) -> None:
        """Reading resumed after the caller caught up: the wait was not the agent's stall."""
        self.last_event_at = max(self.last_event_at, now)

    # -- endings ------------------------------------------------------------------------------

    def induce(self, ending: Ending) -> None:
        """Decide an induced ending (the first one wins); the runtime is then sent
        ``session/cancel`` once, if it ever got the prompt, and its answer awaited."""
        if self.ending is not None or self.result is not None:
            return
        self.ending = ending
        self._cancel_due = self.prompt_sent

    def take_cancel(self, now: float) -> bool:
        """Whether ``session/cancel`` must be sent now (then it counts as sent)."""
        if not self._cancel_due:
            return False
        self._cancel_due = False
        self.cancel_sent_at = now
        return True

    def on_prompt_sent(self) -> None:
        self.prompt_sent = True
        self._cancel_due = self.ending is not None and self.cancel_sent_at is None

    def on_answer(self, result: Any, error: RpcErrorBody | None, masker: Masker, *, hint: str = "") -> None:
        """The runtime answered ``session/prompt``: that decides, unless an ending was induced.
        Whatever of the answer is quoted is masked, escaped and bounded by ``masker``. ``hint``:
        the agent's login instructions, which a refused credential passes on."""
        if self.result is not None:
            return
        answer = result if isinstance(result, dict) else {}
        stop = answer.get("stopReason")
        shown = shown_stop_reason(stop, masker)
        if self.ending is not None:
            self._finish(self.ending.event, self.ending.error(), shown)
        elif error is not None:
            self._finish(TurnFailed, call_error("session/prompt", error, masker, hint=hint))
        elif "stopReason" in answer:
            d = disposition_for_stop_reason(stop, cancel_requested=self.cancel_sent_at is not None, masker=masker)
            failed = RemoteAcpError(d.error_kind, d.message) if d.error_kind is not None else None
            self._finish(d.event, failed, shown, message=d.message)
        else:
            self._finish(TurnFailed, RemoteAcpError(ErrorKind.TURN_OUTCOME_UNKNOWN, UNDECODABLE_ANSWER))

    def on_unreadable_answer(self, why: str, *, answered: bool = True) -> None:
        """A line that was (``answered``), or may have been, the prompt's answer could not be
        read (over the line bound, not JSON, nested too deeply): the outcome cannot be known. The
        runtime's side is cancelled; when its answer may still come it is awaited like any induced
        ending, so nothing of this turn leaks into the next one."""
        self.induce(Ending.outcome_unknown(why))
        self._answered |= answered

    def on_write_failed(self, now: float) -> None:
        if self.write_failed_at is None:
            self.write_failed_at = now

    def on_lost(self) -> None:
        self.lost = True

    def finish_lost(
        self, message: str, detail: str, *, cause: Cause = Cause.AGENT_LOST, facts: ErrorFacts | None = None
    ) -> None:
        """The connection ended before the answer: ``port_exit`` with the exit report, and the
        cause and facts of how the process ended (:mod:`remote_acp.session.exits`)."""
        if self.result is None:
            self._finish(
                TurnFailed, RemoteAcpError(ErrorKind.PORT_EXIT, message, detail=detail, cause=cause, facts=facts)
            )

    def stop(self, ending: Ending) -> None:
        """End now, without waiting for the runtime (the session is closing or being killed)."""
        if self.result is None:
            chosen = self.ending or ending
            self._finish(chosen.event, chosen.error())

    # -- time ---------------------------------------------------------------------------------

    def next_deadline(self) -> float:
        """When :meth:`tick` next has something to decide (``inf``: nothing is due)."""
        if self.result is not None:
            return math.inf
        b = self.bounds
        deadlines = [math.inf]
        if self.ending is None:
            deadlines.append(self.started_at + b.turn_s)
            if b.stall_s > 0 and not self._waiting_for_caller() and not self.link_down:
                deadlines.append(self.last_event_at + b.stall_s)
        if self.cancel_sent_at is not None:
            deadlines.append(-math.inf if self._answered else self.cancel_sent_at + b.read_s)
        elif self.ending is not None and not self.prompt_sent:
            deadlines.append(-math.inf)  # ended before the prompt went out: nothing to wait for
        if self.write_failed_at is not None:
            deadlines.append(self.write_failed_at + b.read_s)
        return min(deadlines)

    def _waiting_for_caller(self) -> bool:
        # The session stopped reading because the caller is behind: silence is not the agent's.
        return len(self.events) >= MAX_BUFFERED_EVENTS or self.buffered_bytes >= MAX_BUFFERED_BYTES

    def tick(self, now: float) -> None:
        """Apply every bound that is due at ``now``."""
        if self.result is not None:
            return
        b = self.bounds
        if self.ending is None:
            if now >= self.started_at + b.turn_s:
                self.induce(Ending.timed_out(b.turn_ms))
            elif (
                b.stall_s > 0
                and not self._waiting_for_caller()
                and not self.link_down
                and now >= self.last_event_at + b.stall_s
            ):
                self.induce(Ending.stalled(b.stall_ms))
        if self.ending is not None:
            sent_at = self.cancel_sent_at
            waited_out = sent_at is not None and (self._answered or now >= sent_at + b.read_s)
            if waited_out or not self.prompt_sent:
                self._finish(self.ending.event, self.ending.error())
                return
        if self.write_failed_at is not None and now >= self.write_failed_at + b.read_s:
            self._finish(TurnFailed, RemoteAcpError(ErrorKind.PORT_EXIT, _WRITE_FAILED, cause=Cause.AGENT_LOST))

    # -- the end ------------------------------------------------------------------------------

    def _finish(
        self, event: type[TurnEnded], error: RemoteAcpError | None, stop_reason: str | None = None, *, message: str = ""
    ) -> None:
        """End with ``error`` (``None``: completed, as ``message`` says)."""
        kind = error.kind if error is not None else None
        text = str(error) if error else message
        if self.dropped:
            self.events.append(
                Malformed(
                    timestamp=utc_now(),
                    pid=self.pid,
                    session_id=self.session_id,
                    message=f"{self.dropped} events arrived after the turn's ending was decided and were dropped",
                )
            )
        self.events.append(
            event(
                timestamp=utc_now(),
                pid=self.pid,
                session_id=self.session_id,
                message=text,
                error_kind=kind,
                stop_reason=stop_reason,
            )
        )
        self.result = TurnResult(
            session_id=self.session_id,
            outcome=event.type,  # type: ignore[arg-type]  # the terminal event types are the outcomes
            message=text,
            error=error,
            stop_reason=stop_reason,
            last_message="",  # the session fills it in once the normalizer has flushed
        )


UNDECODABLE_ANSWER: Final = "the agent's response to the prompt did not decode"
_WRITE_FAILED: Final = "a write to the agent failed and no answer followed within read_timeout_ms"


def not_started(
    session_id: str, pid: int | None, error: RemoteAcpError, last_message: str = ""
) -> tuple[TurnResult, TurnNotStarted]:
    """The result, and the one event, of a turn whose prompt never reached the agent."""
    result = TurnResult(
        session_id=session_id,
        outcome="turn_not_started",
        message=str(error),
        error=error,
        stop_reason=None,
        last_message=last_message,
    )
    event = TurnNotStarted(
        timestamp=utc_now(), pid=pid, session_id=session_id, message=str(error), error_kind=error.kind
    )
    return result, event
