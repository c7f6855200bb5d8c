"""The task that applies a turn's bounds on time, whatever its caller is doing.

The turn machine knows its deadlines (turn, stall, the wait for a cancel's answer); this task
sleeps until the nearest one, or until the session pokes it (:meth:`SessionState.poke
<remote_acp.session.state.SessionState.poke>`: an ending was induced, the connection was lost, a
write began), and then ticks the machine. It also sends the ``session/cancel`` the machine asks
for, fails a write the agent has not read for ``read_timeout_ms`` (an agent that stopped reading
its input), and finishes a turn whose connection was lost with the exit report. Because it runs
in its own task, a slow caller, or one that stopped iterating, cannot delay a bound.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import anyio

from .exits import ended
from .turn import Ending
from .turns import NOT_READING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .state import SessionState
    from .turn import TurnMachine

__all__ = ["Oversight"]


class Oversight:
    """Runs (:meth:`run`) in the session's task group until the session is closed (:meth:`stop`)."""

    def __init__(self, state: SessionState, settle: Callable[[TurnMachine], None]) -> None:
        self._state = state
        self._settle = settle
        self._scope: anyio.CancelScope | None = None

    def stop(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        state = self._state
        with anyio.CancelScope() as scope:
            self._scope = scope
            while True:
                wake = state.wake = anyio.Event()
                machine = state.inbox.turn
                if machine is None:
                    await wake.wait()
                    continue
                now = time.monotonic()
                self._step(machine, now)
                if machine.result is None and machine.lost:
                    wait_s = min(1.0, state.options.output_drain_ms / 1000)
                    end = await ended(state.process, wait_s=wait_s, remote=state.target.remote, started=True)
                    conn = state.conn
                    message = end.message or (conn.loss_message if conn is not None else "the agent's connection ended")
                    machine.finish_lost(message, end.detail, cause=end.cause, facts=end.facts)
                    self._settle(machine)
                    continue
                if machine.result is not None:
                    continue
                deadline = min(machine.next_deadline(), self._writer_deadline())
                if deadline > now:
                    with anyio.move_on_after(deadline - now if deadline < math.inf else math.inf):
                        await wake.wait()

    def _writer_deadline(self) -> float:
        conn = self._state.conn
        if conn is None or conn.writing_since is None or conn.write_failed:
            return math.inf
        return conn.writing_since + self._state.read_s

    def _step(self, machine: TurnMachine, now: float) -> None:
        state = self._state
        conn = state.conn
        if conn is not None and conn.writing_since is not None and now >= conn.writing_since + state.read_s:
            # A write waited read_timeout_ms for the agent to read: it stopped reading its input.
            conn.give_up_writing()
            machine.stop(Ending.port_exit(NOT_READING.format(ms=state.options.read_timeout_ms)))
        machine.tick(now)
        if machine.take_cancel(now) and conn is not None:
            conn.notify("session/cancel", {"sessionId": state.session_id})
        if conn is not None:
            conn.resume_reading()  # an ending decided: the reader must read on to find the answer
        self._settle(machine)
