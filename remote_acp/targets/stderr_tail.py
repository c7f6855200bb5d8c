"""A bounded tail of the agent's standard error, with secrets masked.

The agent's stderr is drained continuously (a pipe left unread fills and blocks the agent), and
only the last bytes are kept for error reports and logs. Values of secret-looking environment
variables are replaced by ``***`` whenever the text is rendered, so a runtime that echoes its
API key in a crash report does not leak it into our logs.

A launch target may name lines of its own chatter (ssh at ``LogLevel VERBOSE`` says
``Authenticated to ...`` on every connection): they are kept, but apart, out of what is logged
and shown, and handed only to the target that reads them (:attr:`TailReport.whole`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..masking import mask_secrets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["StderrTail", "TailReport"]

_OMITTED = "[earlier output omitted] "
_WATCHED_LINE_MAX = 4096


class TailReport(str):
    """:meth:`StderrTail.report`'s text, without the launcher's chatter; :attr:`whole` is the same
    report with it, for the target that reads its own lines (a ``str`` so that every caller that
    shows the report needs nothing more)."""

    whole: str

    def __new__(cls, text: str, whole: str | None = None) -> TailReport:
        report = super().__new__(cls, text)
        report.whole = text if whole is None else whole
        return report


class StderrTail:
    """Keep the last ``limit`` bytes fed; render them as masked, complete lines. ``chatter``
    tells the launcher's own lines, kept out of :meth:`lines` and :meth:`report`."""

    def __init__(
        self, limit: int = 8192, secrets: Iterable[str] = (), chatter: Callable[[str], bool] | None = None
    ) -> None:
        self._limit = limit
        self._buf = bytearray()
        self._cut = False
        self._cut_mid_line = False
        self._total = 0
        self.secrets = tuple(secrets)
        self._chatter = chatter
        self._watch: tuple[bytes, Callable[[bytes], None]] | None = None
        self._line = bytearray()  # the watched stream's line in progress, bounded
        self._runaway = False  # the line in progress outgrew the bound: its rest is no report either

    @property
    def total_bytes(self) -> int:
        """Bytes fed in all (kept or not)."""
        return self._total

    def feed(self, data: bytes) -> None:
        self._total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self._limit:  # trim in batches, not on every read
            self._trim()
        if self._watch is not None:
            self._scan(data)

    def watch_lines(self, prefix: bytes, callback: Callable[[bytes], None]) -> None:
        """Hand ``callback`` each whole line fed from now on that starts with ``prefix`` (a
        launcher's own report on stderr, such as a relay's end of output), as it arrives."""
        self._watch = (prefix, callback)

    def _scan(self, data: bytes) -> None:
        assert self._watch is not None
        prefix, callback = self._watch
        line = self._line
        line += data
        while (end := line.find(b"\n")) >= 0:
            if line.startswith(prefix) and not self._runaway:
                callback(bytes(line[:end]))
            self._runaway = False
            del line[: end + 1]
        if len(line) > _WATCHED_LINE_MAX:  # a runaway line cannot be a report: dropped to its end
            del line[:]
            self._runaway = True

    def _trim(self) -> None:
        drop = len(self._buf) - self._limit
        if drop > 0:
            self._cut_mid_line = self._buf[drop - 1] != 0x0A  # the kept bytes start mid-line
            del self._buf[:drop]
            self._cut = True

    def _kept(self) -> list[str]:
        """Every kept line, chatter included, masked. A line cut by the bound is dropped, so no
        secret is half-kept."""
        self._trim()
        data = bytes(self._buf)
        if self._cut_mid_line:
            newline = data.find(b"\n")
            data = data[newline + 1 :] if newline >= 0 else b""
        text = mask_secrets(data.decode("utf-8", "replace"), self.secrets)
        return [line.rstrip("\r") for line in text.split("\n") if line.strip()]

    def _shown(self, kept: list[str]) -> list[str]:
        chatter = self._chatter
        return kept if chatter is None else [line for line in kept if not chatter(line)]

    def lines(self) -> list[str]:
        """The kept lines but the chatter, masked."""
        return self._shown(self._kept())

    def chatter_lines(self) -> list[str]:
        """The kept lines of the launcher's chatter, masked."""
        return [line for line in self._kept() if self._chatter is not None and self._chatter(line)]

    def report(self) -> TailReport:
        """One line for an error message: the lines but the chatter, joined by `` | ``."""
        kept = self._kept()
        shown = self._shown(kept)
        text = self._render(shown)
        return TailReport(text, self._render(kept) if len(shown) != len(kept) else text)

    def _render(self, lines: list[str]) -> str:
        if not lines:
            return "earlier standard-error output omitted" if self._cut else "no standard-error output"
        joined = " | ".join(lines)
        return f"{_OMITTED}{joined}" if self._cut else joined
