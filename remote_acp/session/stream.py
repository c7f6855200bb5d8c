"""A turn as the caller holds it: an async context manager that is also an async iterator.

Leaving the block before the turn ended (a ``break``, an exception, a cancelled task) cancels the
turn and waits, bounded by ``read_timeout_ms``, for the runtime to settle it, so the session is
never left with a turn in flight that nobody waits for. Misuse (iterating outside the block, or
after it) is a :class:`RuntimeError` with a message that says what to do, whatever ``-O`` says.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    from ..events import Event
    from .turn import TurnMachine, TurnResult

__all__ = ["TurnDriver", "TurnStream"]


class TurnDriver(Protocol):
    """What a :class:`TurnStream` needs from its session."""

    async def accept(self, text: str, *, adopt: int | None = None) -> TurnMachine | tuple[TurnResult, Event]: ...
    async def next_events(self, machine: TurnMachine) -> list[Event]: ...
    async def abort(self, machine: TurnMachine) -> None: ...
    def cancel(self, machine: TurnMachine) -> None: ...


class TurnStream:
    """One turn; obtain it with :meth:`Session.turn <remote_acp.Session.turn>`."""

    def __init__(self, driver: TurnDriver, text: str, *, adopt: int | None = None) -> None:
        self._driver = driver
        self._text = text
        self._adopt = adopt
        self._machine: TurnMachine | None = None
        self._not_started: TurnResult | None = None
        self._buffer: deque[Event] = deque()
        self._state = "new"  # new -> open -> closed

    @property
    def ended(self) -> bool:
        """Whether the turn has ended (:attr:`result` can be read)."""
        return self._outcome() is not None

    @property
    def result(self) -> TurnResult:
        """How the turn ended: readable once the events are all taken, or the block is left
        (which settles a turn still running).

        :raises RuntimeError: when read before the turn ended.
        """
        result = self._outcome()
        if result is None:
            raise RuntimeError(
                "the turn has not ended: read `turn.result` after iterating its events or after its block "
                "(`turn.ended` says whether it has)"
            )
        return result

    def _outcome(self) -> TurnResult | None:
        if self._not_started is not None:
            return self._not_started
        return self._machine.result if self._machine is not None else None

    def cancel(self) -> None:
        """Cancel this turn (see :meth:`Session.cancel <remote_acp.Session.cancel>`)."""
        if self._machine is not None:
            self._driver.cancel(self._machine)

    async def __aenter__(self) -> TurnStream:
        if self._state != "new":
            raise RuntimeError("a turn can be entered once; start another with session.turn(text)")
        self._state = "open"
        accepted = await self._driver.accept(self._text, adopt=self._adopt)
        if isinstance(accepted, tuple):
            self._not_started, event = accepted
            self._buffer.append(event)
        else:
            self._machine = accepted
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._state = "closed"
        if self._machine is not None and self._machine.result is None:
            await self._driver.abort(self._machine)

    def __aiter__(self) -> TurnStream:
        self._check_open()
        return self

    async def __anext__(self) -> Event:
        self._check_open()
        while not self._buffer:
            machine = self._machine
            if machine is None or (machine.result is not None and not machine.events):
                raise StopAsyncIteration
            self._buffer.extend(await self._driver.next_events(machine))
        return self._buffer.popleft()

    def _check_open(self) -> None:
        if self._state == "new":
            raise RuntimeError("iterate a turn inside its block: `async with session.turn(text) as turn:`")
        if self._state == "closed":
            raise RuntimeError("this turn's block has ended; its outcome is in `turn.result`")
