"""The probe's channel read within bounds: what a host prints is hostile until bounded.

A login may print anything before the probe's report (a banner, a dotfile's noise, hundreds of
megabytes), and a process a dotfile leaves behind may keep the channel open after the report.
So the channel is read incrementally, never collected: :class:`ReportScanner` keeps a short tail
of what comes before the report's first line (for the message when no report comes), then the
report from that line on, up to :data:`REPORT_KEPT` bytes, and says to stop the moment the end
line arrives, without waiting for the channel's end. Standard error is read alongside (the
channel's window is shared: an unread stream would stall the other) and only its last
:data:`STDERR_KEPT` bytes are kept. What the host may send costs memory within those bounds and
time within the probe's command timeout, whatever it sends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final, Literal

from .command import REPORT_END, REPORT_HEADER

__all__ = ["READ_SIZE", "REPORT_KEPT", "STDERR_KEPT", "ChannelRead", "ReportScanner", "read_report"]

REPORT_KEPT: Final = 64 * 1024
"""Bytes of the report (from its first line to its end line) a probe reads; past them it stops.
A whole report is a few KiB: every value is cut to :data:`~hostinv.probes.command.MAX_VALUE_CHARS`
on the host."""
STDERR_KEPT: Final = 4096
"""The last bytes of standard error kept, for the message when no report comes."""
NOISE_KEPT: Final = 4096
"""The last bytes printed before the report kept, for the same message."""
READ_SIZE: Final = 64 * 1024

_PREFIX: Final = (REPORT_HEADER.rsplit(" ", 1)[0] + " ").encode()
_END_LINE: Final = ("\n" + REPORT_END).encode()

Ending = Literal["end_line", "eof", "timeout", "overflow"]


class ReportScanner:
    """Fed the channel's stdout in pieces; keeps the report's region and a tail of what came
    before it, within bounds. No I/O.

    The region starts where the report's lines first begin (``#hostinv-probe``, at the start of a
    line or glued to a login's last words that ended without a newline; it then starts a line of
    the region, and :func:`~hostinv.probes.parse_report` reads it from its last header) and ends
    with the first end line after that, at the start of a line. :meth:`feed` says when reading
    can stop: the end line came, or the region outgrew ``kept`` (then :attr:`overflow`)."""

    def __init__(self, kept: int = REPORT_KEPT) -> None:
        self._kept = kept
        self._carry = b""
        self._tail = bytearray()
        self.before = 0
        """Bytes printed before the report's region."""
        self.region: bytearray | None = None
        self.complete = False
        self.overflow = False
        self._searched = 0

    def feed(self, data: bytes) -> bool:
        """Take the next bytes; ``True`` when reading can stop."""
        if self.complete or self.overflow:
            return True
        if self.region is None:
            buf = self._carry + data
            start = buf.find(_PREFIX)
            if start == -1:
                self._note_before(data)
                self._carry = buf[-(len(_PREFIX) - 1) :]
                return False
            in_data = start - len(self._carry)  # < 0: the line began in the carried bytes
            self._note_before(data[: max(in_data, 0)])
            if in_data < 0:
                del self._tail[len(self._tail) + in_data :]
                self.before += in_data
            self.region = bytearray(buf[start:])
            self._searched = 0
        else:
            self.region += data
        return self._look_for_end()

    def _note_before(self, data: bytes) -> None:
        self.before += len(data)
        self._tail += data[-NOISE_KEPT:]
        del self._tail[:-NOISE_KEPT]

    def _look_for_end(self) -> bool:
        region = self.region
        assert region is not None
        at = region.find(_END_LINE, self._searched)
        while at != -1:
            after = at + len(_END_LINE)
            if after == len(region):  # the line may go on: wait for the next bytes (or the end)
                self._searched = at
                break
            if region[after] in b"\r\n":
                del region[after:]
                self.complete = True
                return True
            at = region.find(_END_LINE, at + 1)
        else:
            self._searched = max(0, len(region) - len(_END_LINE))
        if len(region) > self._kept:
            del region[self._kept :]
            self.overflow = True
            return True
        return False

    def text(self) -> str:
        """What the parser reads: the region, or the tail of what came when there was none."""
        kept = self.region if self.region is not None else self._tail
        return bytes(kept).decode(errors="replace")


@dataclass(frozen=True, slots=True)
class ChannelRead:
    """What one probe channel gave. ``ending``: why reading stopped (the end line, the channel's
    end, the command timeout, or a report past its bound)."""

    text: str
    stderr_tail: str
    ending: Ending
    before: int
    """Bytes the login printed before the report (or in all, when none came)."""


async def read_report(conn: Any, command: str, stdin: bytes, timeout_s: float) -> ChannelRead:
    """Run ``command`` on ``conn`` (an asyncssh connection) with ``stdin``, and read its output
    within the bounds above for at most ``timeout_s``. The channel is closed on return.

    :raises OSError, asyncssh.Error: the channel could not be opened or failed.
    """
    scanner = ReportScanner()
    err = bytearray()
    process = await conn.create_process(command, encoding=None)
    ending: Ending = "eof"

    async def read_stderr() -> None:
        while chunk := await process.stderr.read(READ_SIZE):
            err.extend(chunk[-STDERR_KEPT:])
            del err[:-STDERR_KEPT]

    stderr_task = asyncio.ensure_future(read_stderr())
    try:
        try:
            process.stdin.write(stdin)
            process.stdin.write_eof()
        except BrokenPipeError:
            # The command ended before its input was sent (a login shell that refuses commands,
            # such as nologin): what it printed, read below, says why.
            pass
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    chunk = await process.stdout.read(READ_SIZE)
                    if not chunk:
                        await stderr_task  # the rest of stderr, which may say why
                        break
                    if scanner.feed(chunk):
                        ending = "overflow" if scanner.overflow else "end_line"
                        break
        except TimeoutError:
            ending = "timeout"
    finally:
        stderr_task.cancel()
        await asyncio.gather(stderr_task, return_exceptions=True)  # a cancelled caller still goes on
        process.close()
    return ChannelRead(scanner.text(), bytes(err).decode(errors="replace"), ending, scanner.before)
