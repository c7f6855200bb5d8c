"""Turns on a started session: accepting one, handing out its events, settling it.

A turn is accepted once its ``session/prompt`` is on its way (or it is refused, and never
started: :func:`~remote_acp.session.turn.not_started`). From then on the turn machine decides
how it ends, fed by the inbox (what the agent sends) and the oversight task (its bounds); this
module hands its events to the caller and *settles* a turn that has its result: flushes the last
message into it, lets go of its prompt and lets the next turn in. A caller that stops waiting
cancels the turn and waits, bounded, for the runtime to settle it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Final

import anyio

from ..errors import Cause, ErrorKind, RemoteAcpError
from ..events import Event, Notification, SessionStarted, utc_now
from ..protocol.normalize import vendor_token_figure
from ..protocol.wire import prompt_params
from .exits import ended_cause
from .turn import Ending, TurnMachine, TurnResult, not_started

if TYPE_CHECKING:
    from .figures import TurnFigures
    from .state import SessionState

__all__ = ["NOT_READING", "Turns"]

_SETTLE_SLACK_S: Final = 1.0  # beyond read_timeout_ms, how long an abandoned turn may take to settle
_ENDED_BEFORE_TURN: Final = "the agent connection ended before this turn could start"
NOT_READING: Final = "the agent stopped reading its input: a write waited read_timeout_ms ({ms} ms)"


class Turns:
    """The session's :class:`~remote_acp.session.stream.TurnDriver`: one turn at a time."""

    def __init__(self, state: SessionState, figures: TurnFigures) -> None:
        self._state = state
        self._figures = figures
        self._figured: TurnMachine | None = None  # the latest turn whose figures were handed out

    def _not_started(self, kind: ErrorKind, message: str, *, cause: Cause | None = None) -> tuple[TurnResult, Event]:
        state = self._state
        return not_started(state.session_id, state.pid, RemoteAcpError(kind, message, cause=cause))

    async def accept(self, text: str, *, adopt: int | None = None) -> TurnMachine | tuple[TurnResult, Event]:
        """Start a turn: its machine once the prompt is on its way, else why it never started.
        ``adopt``: the id of a prompt an earlier controller sent (a session taken over mid-turn):
        nothing is sent, and the turn ends with that prompt's answer."""
        state = self._state
        conn, inbox = state.conn, state.inbox
        if conn is None or state.info is None:
            return self._not_started(ErrorKind.RESPONSE_ERROR, "the session has not started", cause=Cause.MISUSE)
        if state.closing:
            return self._not_started(ErrorKind.RESPONSE_ERROR, "the session is closed", cause=Cause.MISUSE)
        if inbox.turn is not None:
            return self._not_started(
                ErrorKind.RESPONSE_ERROR, "a turn is already in flight for this session", cause=Cause.MISUSE
            )
        if conn.lost.is_set() or conn.write_failed:
            message = conn.loss_message if conn.output_abandoned else _ENDED_BEFORE_TURN
            status = state.process.exit_status if state.process is not None else None
            return self._not_started(
                ErrorKind.PORT_EXIT, message, cause=ended_cause(status, remote=state.target.remote, started=True)
            )
        session_id, pid = state.session_id, state.pid
        machine = TurnMachine(text, state.bounds, now=time.monotonic(), session_id=session_id, pid=pid)
        opening: list[Event] = [SessionStarted(timestamp=utc_now(), pid=pid, session_id=session_id)]
        if (gaps := state.capabilities.take_notice()) is not None:
            opening.append(Notification(timestamp=utc_now(), pid=pid, session_id=session_id, message=gaps))
        inbox.attach(machine, opening)
        if inbox.latched is not None:
            # A request between turns already decided this turn: it ends without a prompt.
            machine.induce(inbox.latched)
            inbox.latched = None
            machine.tick(time.monotonic())
            self.settle(machine)
            return machine
        # What arrives from now on answers this prompt; a loaded session's replay is over.
        state.normalizer.replaying = False
        if adopt is not None:
            prompt = inbox.prompt = conn.adopt(adopt, "session/prompt")
            prompt.on_done = lambda: self._on_prompt_done(machine)
            if prompt.done.is_set():
                self._on_prompt_done(machine)
            machine.on_prompt_sent()
            state.poke()
            return machine
        prompt = conn.call("session/prompt", prompt_params(session_id, text))
        inbox.prompt = prompt
        prompt.on_done = lambda: self._on_prompt_done(machine)
        try:
            with anyio.move_on_after(state.read_s):
                await prompt.ticket.done.wait()
        except BaseException:
            # The caller stopped waiting. A prompt still queued is taken back: the turn never
            # existed. One that (partly) reached the runtime is settled like a cancelled turn, so
            # the session is neither wedged "in flight" nor handed this turn's late output.
            if conn.retract(prompt.ticket):
                conn.abandon(prompt)
                inbox.detach(give_back=True)
            else:
                machine.on_prompt_sent()
                await self.abort(machine)
            raise
        if not prompt.ticket.done.is_set():
            if conn.retract(prompt.ticket):
                conn.abandon(prompt)
                inbox.detach(give_back=True)
                return self._not_started(
                    ErrorKind.RESPONSE_TIMEOUT, "timed out waiting for the agent connection to start the turn"
                )
            # Part of the prompt went out and the rest cannot: the agent stopped reading.
            machine.on_prompt_sent()
            conn.give_up_writing()
            machine.stop(Ending.port_exit(NOT_READING.format(ms=state.options.read_timeout_ms)))
            self.settle(machine)
            return machine
        if prompt.ticket.failed:
            conn.abandon(prompt)
            inbox.detach(give_back=True)
            return self._not_started(ErrorKind.PORT_EXIT, "failed to send the prompt to the agent")
        machine.on_prompt_sent()
        state.poke()
        return machine

    def _on_prompt_done(self, machine: TurnMachine) -> None:
        """The prompt's answer arrived, or the connection ended first (from the reader)."""
        state = self._state
        prompt = state.inbox.prompt
        if machine is not state.inbox.turn or prompt is None:
            return
        response = prompt.response
        if response is None and prompt.unreadable is not None:
            machine.on_unreadable_answer(f"the agent's answer to the prompt could not be read: {prompt.unreadable}")
        elif response is None:
            machine.on_lost()
        else:
            self._figures.vendor = vendor_token_figure(response.result)
            machine.on_answer(response.result, response.error, state.normalizer.masker, hint=state.auth_hint)
        self.settle(machine)
        state.poke()

    async def next_events(self, machine: TurnMachine) -> list[Event]:
        """The turn's events the caller has not taken; waits for some (or for the end)."""
        inbox, conn = self._state.inbox, self._state.conn
        while True:
            if machine.result is not None and machine is not self._figured:
                # The terminal event waits for the turn's figures; what precedes it goes now.
                if len(machine.events) > 1:
                    terminal = machine.events.pop()
                    events = machine.take_all()
                    machine.events.append(terminal)
                    return events
                self._figured = machine
                return [*await self._figures.collect(machine), *machine.take_all()]
            if machine.events:
                events = machine.take_all()
                if conn is not None and conn.reader_paused:
                    conn.resume_reading()
                return events
            if machine.result is not None:
                return []
            wake = inbox.turn_wake
            if wake.is_set():
                wake = inbox.turn_wake = anyio.Event()
                continue
            await wake.wait()

    def cancel(self, machine: TurnMachine) -> None:
        """Ask for ``machine``'s end: the oversight task sends ``session/cancel``."""
        if machine.result is None:
            machine.induce(Ending.cancelled())
            self._state.poke()

    async def abort(self, machine: TurnMachine) -> None:
        """The caller stopped waiting: cancel the turn and settle it within ``read_timeout_ms``."""
        with anyio.CancelScope(shield=True):
            if machine.result is not None:
                return
            self.cancel(machine)
            with anyio.move_on_after(self._state.read_s + _SETTLE_SLACK_S):
                while machine.result is None:
                    await self.next_events(machine)
            if machine.result is None:  # cannot happen while the oversight runs; never wedge anyway
                machine.stop(Ending.cancelled())
                self.settle(machine)
            machine.take_all()

    def settle(self, machine: TurnMachine) -> None:
        """A turn that has its result: flush the last message into it and let the next turn in."""
        state = self._state
        inbox, normalizer = state.inbox, state.normalizer
        if machine.result is None or machine is not inbox.turn:
            return
        # The terminal event is last: move it behind the message the normalizer still holds.
        terminal = machine.events.pop()
        normalizer.flush(machine.events.append)
        normalizer.flush_dropped(machine.events.append)
        machine.events.append(terminal)
        machine.result = dataclasses.replace(machine.result, last_message=normalizer.last_message)
        prompt = inbox.prompt
        if prompt is not None and state.conn is not None and not prompt.done.is_set():
            state.conn.abandon(prompt)
        if machine.ending is not None and machine.ending.kind is ErrorKind.TURN_INPUT_REQUIRED:
            state.log.warning("agent asked for a decision only a person can make, ending the attempt")
        inbox.detach()
        inbox.turn_wake.set()
