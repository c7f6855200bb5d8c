"""The command's standard streams, made safe for whatever text an agent sends (stdlib only)."""

from __future__ import annotations

import contextlib
from typing import IO, Final, cast

__all__ = ["tolerant"]

# Error handlers that never raise on a character (``surrogateescape`` does, on most of them).
_TOLERANT: Final = frozenset({"replace", "backslashreplace", "xmlcharrefreplace", "namereplace", "ignore"})


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
