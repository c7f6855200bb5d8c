"""The process's standard descriptors 0-2 and its text streams, made safe before the command runs.

Its own module, apart from the output buffers of :mod:`.streams`, because the entry point needs
it before it knows which command runs (``remote-acp --version`` loads this and click, nothing
more).
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, Final, cast

__all__ = ["CLOSED_AT_START", "occupy_closed_std_fds", "tolerant"]

# Error handlers that never raise on a character (``surrogateescape`` does, on most of them).
_TOLERANT: Final = frozenset({"replace", "backslashreplace", "xmlcharrefreplace", "namereplace", "ignore"})

CLOSED_AT_START: Final[set[int]] = set()
"""Which of fds 0-2 were closed when the command started (see :func:`occupy_closed_std_fds`)."""


def occupy_closed_std_fds() -> None:
    """Open ``/dev/null`` on whichever of fds 0-2 the command was started without.

    Left free, the lowest fd is what the next pipe gets: an agent's stdin could land on fd 1,
    and our output would go to the agent. The closed ones are remembered, so the first write to
    a stream that was closed at start still fails as a write to a closed stream does.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            CLOSED_AT_START.add(fd)
    for fd in sorted(CLOSED_AT_START):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


class _Discard:
    """Where output goes when the process has no stdout/stderr at all (started with it closed)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def tolerant(stream: IO[str] | None) -> IO[str]:
    """``stream``, made to replace characters its encoding cannot carry instead of raising."""
    if stream is None:
        return cast("IO[str]", _Discard())
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) not in _TOLERANT:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="replace")
    return stream
