"""A bounded tail of the agent's standard error, with secrets masked.

The agent's stderr is drained continuously (a pipe left unread fills and blocks the agent), and
only the last bytes are kept for error reports and logs. Values of secret-looking environment
variables are replaced by ``***`` whenever the text is rendered, so a runtime that echoes its
API key in a crash report does not leak it into our logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..masking import mask_secrets

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["StderrTail"]


class StderrTail:
    """Keep the last ``limit`` bytes fed; render them as masked, complete lines."""

    def __init__(self, limit: int = 8192, secrets: Iterable[str] = ()) -> None:
        self._limit = limit
        self._buf = bytearray()
        self._cut = False
        self._cut_mid_line = False
        self._total = 0
        self.secrets = tuple(secrets)

    @property
    def total_bytes(self) -> int:
        """Bytes fed in all (kept or not)."""
        return self._total

    def feed(self, data: bytes) -> None:
        self._total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self._limit:  # trim in batches, not on every read
            self._trim()

    def _trim(self) -> None:
        drop = len(self._buf) - self._limit
        if drop > 0:
            self._cut_mid_line = self._buf[drop - 1] != 0x0A  # the kept bytes start mid-line
            del self._buf[:drop]
            self._cut = True

    def lines(self) -> list[str]:
        """The kept lines, masked. A line cut by the bound is dropped, so no secret is half-kept."""
        self._trim()
        data = bytes(self._buf)
        if self._cut_mid_line:
            newline = data.find(b"\n")
            data = data[newline + 1 :] if newline >= 0 else b""
        text = mask_secrets(data.decode("utf-8", "replace"), self.secrets)
        return [line.rstrip("\r") for line in text.split("\n") if line.strip()]

    def report(self) -> str:
        """One line for an error message: lines joined by `` | ``."""
        lines = self.lines()
        if not lines:
            return "earlier standard-error output omitted" if self._cut else "no standard-error output"
        joined = " | ".join(lines)
        return f"[earlier output omitted] {joined}" if self._cut else joined
