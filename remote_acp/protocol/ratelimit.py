"""A token bucket for events an agent can provoke at will, without I/O or a clock of its own.

The caller passes the current time, so tests step time instead of sleeping.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``burst`` events at once, then ``rate`` per second; counts what it refused."""

    __slots__ = ("_last", "_tokens", "burst", "dropped", "rate")

    def __init__(self, burst: int, rate: float) -> None:
        self.burst = burst
        self.rate = rate
        self._tokens = float(burst)
        self._last: float | None = None
        self.dropped = 0
        """Refused since :meth:`take_dropped` last reported them."""

    def take(self, now: float) -> bool:
        """Spend one token at ``now`` (monotonic seconds); ``False`` (and counted) when none is left."""
        if self._last is not None and now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        if self._last is None or now > self._last:
            self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.dropped += 1
        return False

    def take_dropped(self) -> int:
        """The count of refused events, reset to zero."""
        dropped, self.dropped = self.dropped, 0
        return dropped
