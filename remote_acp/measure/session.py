"""A session's measurement: the claim, restart to settle, each turn's wait, the drop, the cleanup.

Theory of operation (docs/library.md, "Token accounting"):

- **Claim** (:meth:`Measurement.__init__`): when the remote rules allow a measurement
  (``rules_for(target.remote).measurement``), every source whose runtime ``agent.command`` names
  claims the launch. The first start carries the claimed sources' settings.
- **Settle** (:meth:`Measurement.settle`, after each ``initialize``): the handshake's
  ``agentInfo.name`` says which source may read this runtime (none, when no source reads it).
  When that differs from what the start carried, the caller stops the process and starts
  ``agent.command`` again carrying exactly that source, at most :data:`MAX_STARTS` starts in all.
  A source the next start does not carry has its directory removed before that start.
- **Each turn** (:meth:`Measurement.after_turn`): once the runtime answered the prompt, wait,
  bounded by ``read_timeout_ms``, for the turn's records. A wait that ends before the source's own
  window (``read_timeout_ms`` too short, or the turn cancelled) leaves the source in place; a wait
  that ran the whole window and found nothing, before any turn had a figure, drops the source for
  the rest of the session. Once a turn has had a figure the source stays.
- **Cleanup** (:meth:`Measurement.close`): the confirmed source's directory goes at session end,
  whichever way the session ends.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio

from .gemini import GeminiSource
from .telemetry import sum_records

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..logs import ContextLogger
    from .source import Armed, Source
    from .telemetry import Figure, TokenRecord

__all__ = ["MAX_STARTS", "SOURCES", "Measurement"]

MAX_STARTS: Final = 3
"""A session start runs the runtime at most this many times."""
SOURCES: Final[tuple[Source, ...]] = (GeminiSource(),)
"""The sources shipped: one, for Gemini CLI."""
_POLL_S: Final = 0.2


class Measurement:
    """The measurement state of one session. ``allowed``: the remote rules' ``measurement``."""

    def __init__(
        self, argv: Sequence[str], *, allowed: bool, log: ContextLogger, sources: Sequence[Source] = SOURCES
    ) -> None:
        self._sources = tuple(sources) if allowed else ()
        self.log = log
        self._wanted = [s for s in self._sources if s.names(argv)]
        self._armed: list[Armed] = []
        self.starts = 0
        self.confirmed: Armed | None = None
        """The source reading this session, once the handshake confirmed it and until dropped."""
        self.why_not = "" if allowed else "a remote launch is never claimed: its runtime writes on the other host"
        """Why the session is not measured (empty while it is, or may yet be)."""
        self._had_figure = False

    @property
    def measured(self) -> bool:
        return self.confirmed is not None

    def arm_start(self) -> dict[str, str]:
        """Arm the next start with the wanted sources; the environment it adds."""
        self.starts += 1
        self._armed = [source.arm() for source in self._wanted]
        env: dict[str, str] = {}
        for armed in self._armed:
            env.update(armed.env)
        return env

    def settle(self, agent_name: str) -> bool:
        """After a start's handshake: ``True`` when the runtime must be started again (the
        directories of sources the next start does not carry are already removed)."""
        reader = next((s for s in self._sources if s.runtime == agent_name), None)
        wanted = [reader] if reader is not None else []
        carried = [a.source for a in self._armed]
        if carried != wanted and self.starts < MAX_STARTS:
            self._release(keep=None)
            self._wanted = wanted
            return True
        self.confirmed = next((a for a in self._armed if a.source is reader), None)
        self._release(keep=self.confirmed)
        if self.confirmed is None and not self.why_not:
            if reader is None:
                self.why_not = f"no measurement source reads the runtime {agent_name!r}"
            else:
                self.why_not = f"the runtime did not settle on a measured start in {MAX_STARTS} starts"
        return False

    async def after_turn(
        self, session_id: str, *, answered: bool, wait_s: float, lower_bound: tuple[int, int] | None, ended: anyio.Event
    ) -> tuple[Figure | None, str | None]:
        """Wait for a turn's records: its figure (``None`` without one) and, when the source was
        dropped by this wait, why. ``answered``: the runtime answered the prompt itself (a
        cancelled or failed turn does not wait: the source was not asked); ``lower_bound``: the
        vendor's (input, output) on the result, which tells a figure that covers the turn's main
        calls; ``ended``: set to end the wait early (the turn cancelled, the session closing)."""
        armed = self.confirmed
        if armed is None or not answered:
            return None, None
        window = armed.source.window_s
        conclusive = wait_s >= window
        deadline = time.monotonic() + min(wait_s, window)
        records: list[TokenRecord] = []
        while True:
            records += await anyio.to_thread.run_sync(armed.read, session_id)
            if _covers(records, lower_bound) or time.monotonic() >= deadline:
                break
            with anyio.move_on_after(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
                await ended.wait()
            if ended.is_set():
                conclusive = False
                break
        # What was found is this turn's; whatever arrives later (a cancelled turn's records, or
        # the rest of a turn longer than the runtime's batching) counts in the next turn's figure.
        figure = sum_records(records)
        if figure is not None:
            self._had_figure = True
            return figure, None
        if conclusive and not self._had_figure:
            why = f"the measurement source wrote no record within {window:g} s of a turn's answer"
            self.confirmed = None
            self.why_not = why
            return None, why
        return None, None

    def close(self) -> None:
        """Remove every directory still held (the session has ended, whichever way)."""
        self._release(keep=None)
        if self.confirmed is not None:
            self.confirmed.close()

    def _release(self, keep: Armed | None) -> None:
        for armed in self._armed:
            if armed is not keep:
                armed.close()
        self._armed = [keep] if keep is not None else []


def _covers(records: Sequence[TokenRecord], lower_bound: tuple[int, int] | None) -> bool:
    """Whether the main calls' records reach the vendor's own figure for the turn."""
    main = [r for r in records if r.role == "main"]
    if not main or lower_bound is None:
        return False
    return sum(r.input for r in main) >= lower_bound[0] and sum(r.output for r in main) >= lower_bound[1]
