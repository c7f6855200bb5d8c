"""A turn's token figures: the vendor's lower bound and the measurement source's count.

The vendor's figure rides on the prompt's answer (:func:`~remote_acp.protocol.normalize.vendor_token_figure`)
and is only a lower bound; a confirmed measurement source (:mod:`remote_acp.measure`) may count
the turn after it ended, within ``read_timeout_ms``. The turn's terminal event waits for both,
so a caller sees the figures before the turn ends; :meth:`TurnFigures.end_wait` (a cancel, a
teardown) cuts that wait short, and the turn ends unmeasured.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import anyio

from ..events import Event, TokenLowerBound, TokenUsage, TurnEnded, utc_now
from ..protocol.normalize import VENDOR_TOKEN_FIELD
from .capabilities import Capability

if TYPE_CHECKING:
    from .state import SessionState
    from .turn import TurnMachine

__all__ = ["TurnFigures"]


class TurnFigures:
    """The figures of the latest turn, collected once it ended."""

    def __init__(self, state: SessionState) -> None:
        self._state = state
        self.vendor: tuple[int, int] | None = None
        """(input, output) on the latest prompt's answer, if it carried them."""
        self._ended = anyio.Event()

    def end_wait(self) -> None:
        """Stop waiting for the measurement source: the turn ends unmeasured."""
        self._ended.set()

    async def collect(self, machine: TurnMachine) -> list[Event]:
        """The turn's token events: the vendor's lower bound, if its answer carried one, and
        the measurement source's figure, if the session is measured and the source answered."""
        state = self._state
        events: list[Event] = []
        vendor, self.vendor = self.vendor, None
        ending = machine.events[-1] if machine.events else None
        answered = machine.ending is None and isinstance(ending, TurnEnded) and ending.stop_reason is not None
        if vendor is not None and answered:
            events.append(
                TokenLowerBound(
                    timestamp=utc_now(),
                    pid=state.pid,
                    session_id=state.session_id,
                    input_tokens=vendor[0],
                    output_tokens=vendor[1],
                    source=VENDOR_TOKEN_FIELD,
                )
            )
        measurement = state.measurement
        if measurement is None or not measurement.measured or state.closing:
            return events
        self._ended = anyio.Event()
        figure, dropped = await measurement.after_turn(
            state.session_id, answered=answered, wait_s=state.read_s, lower_bound=vendor, ended=self._ended
        )
        if figure is not None:
            events.append(
                TokenUsage(
                    timestamp=utc_now(),
                    pid=state.pid,
                    session_id=state.session_id,
                    model=figure.model,
                    input_tokens=figure.input_tokens,
                    output_tokens=figure.output_tokens,
                    cache_read_tokens=figure.cache_read_tokens,
                    total_tokens=figure.total_tokens,
                )
            )
        if dropped is not None:
            state.capabilities.lower(Capability.TOKEN_COUNTS, dropped)
            if state.info is not None:
                state.info = dataclasses.replace(state.info, measured=False)
        return events
