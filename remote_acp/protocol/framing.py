"""Newline framing with a hard bound on line length, without I/O.

Theory of operation: bytes from the agent's stdout are fed in whatever pieces the pipe
delivers; complete lines come out. A line longer than the bound is never buffered whole: the
moment the pending bytes cross the bound they are dropped, :data:`OVERSIZED` is reported once,
and everything up to the next newline is discarded. Framing then resynchronizes on the line
after it, so one hostile line costs one frame, never the connection or unbounded memory.
"""

from __future__ import annotations

import enum
from typing import Final, Literal

__all__ = ["DEFAULT_MAX_LINE_BYTES", "OVERSIZED", "Frame", "LineFramer"]

DEFAULT_MAX_LINE_BYTES: Final = 10 * 1024 * 1024


class Frame(enum.Enum):
    """Markers the framer yields in place of a line."""

    OVERSIZED = "oversized"


OVERSIZED: Final = Frame.OVERSIZED
"""Yielded once for a line that exceeded the bound (its bytes are discarded)."""

FrameItem = bytes | Literal[Frame.OVERSIZED]

_HEAD: Final = 1600


class LineFramer:
    """Split a byte stream into newline-terminated lines of at most ``max_line_bytes``.

    Empty lines are skipped. The bound counts the bytes of a line without its newline.
    """

    __slots__ = ("_discarding", "_max", "_pending", "oversized_head")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._pending = bytearray()
        self._discarding = False
        self.oversized_head = b""
        """The first bytes of the latest over-long line (enough to see which request it answered)."""

    @property
    def max_line_bytes(self) -> int:
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete line held right now (never more than the bound)."""
        return len(self._pending)

    def feed(self, data: bytes) -> list[FrameItem]:
        """Consume ``data`` and return the frames it completed, in order."""
        out: list[FrameItem] = []
        if not data:
            return out
        parts = data.split(b"\n")
        tail = parts.pop()
        if parts:
            head = parts[0]
            if self._discarding:
                # The oversized line ends here; it was already reported.
                self._discarding = False
            elif self._pending:
                self._pending += head
                self._emit(bytes(self._pending), out)
                self._pending.clear()
            else:
                self._emit(head, out)
            for line in parts[1:]:
                self._emit(line, out)
        self._hold(tail, out)
        return out

    def end(self) -> list[FrameItem]:
        """Signal end of stream; an unterminated last line is returned as a frame."""
        out: list[FrameItem] = []
        if self._pending and not self._discarding:
            self._emit(bytes(self._pending), out)
        self._pending.clear()
        self._discarding = False
        return out

    def _emit(self, line: bytes, out: list[FrameItem]) -> None:
        if len(line) > self._max:
            self.oversized_head = line[:_HEAD]
            out.append(OVERSIZED)
        elif line:
            out.append(line)

    def _hold(self, tail: bytes, out: list[FrameItem]) -> None:
        if self._discarding or not tail:
            return
        if len(self._pending) + len(tail) > self._max:
            self.oversized_head = bytes(self._pending[:_HEAD]) + tail[: max(0, _HEAD - len(self._pending))]
            self._pending.clear()
            self._discarding = True
            out.append(OVERSIZED)
        else:
            self._pending += tail
