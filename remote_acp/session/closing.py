"""Closing a session: once, from any task, shielded, whether or not it finished starting.

Every task that asks (the caller's ``aclose``, ``open_session``'s exit, a failed start, the
guard) waits for the same teardown, which always ends. The guard task covers the one case no
caller asks: the task group the session runs in is cancelled without ``aclose`` (the caller's
block failed). The connection's tasks are shielded and would keep that group open forever, so
the guard closes the session then. The agent itself is stopped in the fixed order of
:mod:`remote_acp.session.teardown`; this module settles the turn in flight before it, and after
it ends the session's own tasks and gives back what the session registered (secrets to mask, a
measurement source).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import anyio

from .. import masking
from .teardown import ProtocolClose, stop_agent
from .turn import Ending

if TYPE_CHECKING:
    from collections.abc import Callable

    from .figures import TurnFigures
    from .oversight import Oversight
    from .state import SessionState
    from .turn import TurnMachine

__all__ = ["Closing"]

_CLOSED_MID_TURN: Final = "the session was closed while the turn was running"


class Closing:
    """The session's teardown and its guard."""

    def __init__(
        self,
        state: SessionState,
        *,
        settle: Callable[[TurnMachine], None],
        figures: TurnFigures,
        oversight: Oversight,
    ) -> None:
        self._state = state
        self._settle = settle
        self._figures = figures
        self._oversight = oversight
        self._guard_scope: anyio.CancelScope | None = None
        self._done = anyio.Event()

    async def guard(self) -> None:
        """Close the session when the task group it runs in is cancelled from outside; ends
        once the session is closed."""
        with anyio.CancelScope() as scope:
            self._guard_scope = scope
            if self._state.closing:  # closed before this task got to run
                return
            try:
                await anyio.sleep_forever()
            finally:
                if not scope.cancel_called:  # cancelled from outside, not by our own teardown
                    with anyio.CancelScope(shield=True):
                        await self.close()

    async def close(self) -> None:
        """Stop the session in the fixed order; every task that asks waits for the same teardown."""
        state = self._state
        with anyio.CancelScope(shield=True):
            if state.closing:
                await self._done.wait()
                return
            state.closing = True
            self._figures.end_wait()
            try:
                if (machine := state.inbox.turn) is not None:
                    machine.stop(Ending.cancelled(_CLOSED_MID_TURN))
                    self._settle(machine)
                conn, process = state.conn, state.process
                if conn is None or process is None:
                    return
                close = (
                    ProtocolClose(state.close_method, state.session_id) if state.close_method and state.info else None
                )
                await stop_agent(
                    conn,
                    process,
                    grace_s=state.grace_s,
                    drain_s=state.options.output_drain_ms / 1000,
                    close=close,
                    log=state.log,
                )
                between = state.inbox.between
                if between.events:
                    state.log.warning(
                        "dropping events queued for a turn that never started", extra={"count": len(between.events)}
                    )
                    between.take()
            finally:
                self._oversight.stop()
                if self._guard_scope is not None:
                    self._guard_scope.cancel()
                if state.secrets is not None:
                    masking.unregister(state.secrets)
                    state.secrets = None
                if state.measurement is not None:
                    state.measurement.close()
                self._done.set()
