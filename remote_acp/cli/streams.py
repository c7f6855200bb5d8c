"""The command's stdout and stderr, written so that they are never a reason for the run to stop
honouring its bounds and signals.

A pipe nobody reads blocks a write for as long as the reader sleeps. Written from the event
loop, that would hold every bound and signal of the run hostage, so each stream is written by a
daemon thread of its own from a bounded buffer: the event loop only appends, and waits (without
blocking the loop) for room when the buffer is full. A write error (a closed pipe, a full disk)
is recorded by the thread and raised as :class:`OutputError` by the next write.
"""

from __future__ import annotations

import atexit
import errno
import locale
import math
import os
import sys
import threading
import time
from typing import IO, Final, cast

from .standard_fds import CLOSED_AT_START

__all__ = ["Output", "OutputError", "OutputStream", "standard_output"]

_BUFFER_BYTES: Final = 256 * 1024
_POLL_MIN_S: Final = 0.001
_POLL_MAX_S: Final = 0.02
_COALESCE_BYTES: Final = 16 * 1024
_COALESCE_S: Final = 0.002  # unnoticeable on a terminal, long enough to gather a burst
_EXIT_IDLE_S: Final = 2.0


class OutputError(Exception):
    """Writing the command's output failed; ``broken_pipe`` when its reader went away."""

    def __init__(self, error: OSError) -> None:
        super().__init__(f"cannot write the output: {error}")
        self.broken_pipe = isinstance(error, BrokenPipeError)


async def _pause(seconds: float) -> None:
    # Seam: anyio (about 3 ms) loads when a write first waits for room: only a run's coroutines
    # wait, and the other commands, whose log lines come through here too, never load it.
    import anyio

    await anyio.sleep(seconds)


class _Patience:
    """Until when a write may wait for room; shared by the streams of one :class:`Output`."""

    def __init__(self) -> None:
        self.deadline = math.inf
        self.gone = False  # given up for good (a signal): waits end at once, also the final drain


class OutputStream:
    """One fd, written by a daemon thread from a bounded buffer."""

    def __init__(self, fd: int, patience: _Patience | None = None, *, closed: bool = False) -> None:
        self._fd = fd
        self._patience = patience or _Patience()
        self._cond = threading.Condition(threading.Lock())
        self._buf = bytearray()
        self._pending = 0  # appended and not yet written (in the buffer or in the thread's hands)
        self._written = 0  # how many bytes the thread wrote: progress, for the final drain
        self._error: OSError | None = OSError(errno.EBADF, os.strerror(errno.EBADF)) if closed else None
        self._thread: threading.Thread | None = None
        self._idle = False
        self._abandoned = False
        self.dropped = 0
        """Writes given up because the buffer stayed full past the patience deadline."""

    def put(self, data: bytes) -> None:
        """Append ``data`` whatever the buffer holds (for the few lines that must not be dropped)."""
        with self._cond:
            if self._error is not None:
                raise OutputError(self._error)
            self._append(data)

    def try_write(self, data: bytes) -> bool:
        """Append ``data`` if there is room now (the common case, without a coroutine); ``False``
        when the caller must :meth:`write` and wait. Raises the thread's write error."""
        with self._cond:
            if self._error is not None:
                raise OutputError(self._error)
            if self._pending < _BUFFER_BYTES:
                self._append(data)
                return True
        return False

    async def write(self, data: bytes) -> bool:
        """Append ``data``, waiting for room without blocking the event loop.

        Returns ``False`` when the buffer stayed full past the patience deadline (the reader
        stopped reading and the run must go on ending): ``data`` is dropped and counted.
        """
        delay = _POLL_MIN_S
        while not self.try_write(data):
            if self._patience.gone or time.monotonic() >= self._patience.deadline:
                self.dropped += 1
                return False
            await _pause(delay)
            delay = min(delay * 2, _POLL_MAX_S)
        return True

    def offer(self, data: bytes) -> None:
        """Append ``data`` if there is room, else drop it (counted); never raises or waits: for
        log lines, written from wherever logging is called."""
        with self._cond:
            if self._error is None and self._pending < _BUFFER_BYTES:
                self._append(data)
            elif self._error is None:
                self.dropped += 1

    def drain_now(self, idle_s: float) -> None:
        """:meth:`drain` for the interpreter's exit (no event loop): bounded the same way."""
        last, since = -1, time.monotonic()
        while True:
            with self._cond:
                if self._error is not None or self._pending == 0:
                    return
                written = self._written
            now = time.monotonic()
            if written != last:
                last, since = written, now
            elif now - since >= idle_s or self._patience.gone or self._abandoned:
                return
            time.sleep(_POLL_MAX_S)

    async def drain(self, idle_s: float) -> bool:
        """Wait until everything appended is written; ``False`` once ``idle_s`` passes without
        progress (an unread pipe) or the wait is given up. Raises the thread's write error."""
        last, since = -1, time.monotonic()
        while True:
            with self._cond:
                if self._error is not None:
                    raise OutputError(self._error)
                if self._pending == 0:
                    return True
                written = self._written
            now = time.monotonic()
            if written != last:
                last, since = written, now
            elif now - since >= idle_s or self._patience.gone:
                self._abandoned = True  # nobody reads: the exit does not wait for it again
                return False
            await _pause(_POLL_MAX_S)

    def _append(self, data: bytes) -> None:  # with self._cond held
        if not data:
            return
        self._buf += data
        self._pending += len(data)
        if self._thread is None:
            self._thread = threading.Thread(target=self._pump, name=f"remote-acp-fd{self._fd}", daemon=True)
            self._thread.start()
            # Whatever is still buffered at exit (a log line just before a usage error) gets its
            # chance, bounded like the run's own closing lines.
            atexit.register(self.drain_now, _EXIT_IDLE_S)
        elif self._idle:
            self._cond.notify()

    def _pump(self) -> None:
        while True:
            with self._cond:
                while not self._buf:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                small = len(self._buf) < _COALESCE_BYTES
            if small:
                # A streamed reply comes a few bytes at a time: a moment's wait gathers many
                # chunks into one write (and spares the event loop a wake-up per chunk).
                time.sleep(_COALESCE_S)
            with self._cond:
                data = bytes(self._buf)
                self._buf.clear()
            view = memoryview(data)
            try:
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                    with self._cond:
                        self._written += n
            except OSError as exc:
                with self._cond:
                    self._error = exc
                    self._buf.clear()
                    self._pending = 0
                return
            with self._cond:
                self._pending -= len(data)


class Output:
    """The command's stdout and stderr, each an :class:`OutputStream`, and how long writes wait."""

    def __init__(self, out: OutputStream, err: OutputStream, patience: _Patience, encoding: str = "utf-8") -> None:
        self.out = out
        self.err = err
        self._patience = patience
        self.encoding = encoding
        """What human text is encoded in (characters it cannot carry are replaced)."""

    def log_stream(self) -> IO[str]:
        """A text stream for log lines on stderr, in order with the notices, that never blocks:
        a line that finds the buffer full (stderr unread) is dropped and counted."""
        return cast("IO[str]", _LogStream(self.err, self.encoding))

    def wait_until(self, deadline: float) -> None:
        """A write waiting for room gives up at ``deadline`` (monotonic): the end of a turn's
        bound, which the session can only enforce once the write returns."""
        self._patience.deadline = deadline

    def give_up(self) -> None:
        """From now on no write or drain waits for an unread pipe (the run was told to stop)."""
        self._patience.gone = True

    @property
    def dropped(self) -> int:
        return self.out.dropped + self.err.dropped


class _LogStream:
    def __init__(self, stream: OutputStream, encoding: str) -> None:
        self._stream = stream
        self._encoding = encoding

    def write(self, text: str) -> int:
        self._stream.offer(text.encode(self._encoding, "backslashreplace"))
        return len(text)

    def flush(self) -> None:
        pass


_standard: Output | None = None


def standard_output() -> Output:
    """The process's own stdout and stderr as one :class:`Output` (made once: every writer to
    fd 1 or 2 must go through the same buffer, or lines interleave out of order)."""
    global _standard
    if _standard is None:
        patience = _Patience()
        encoding = getattr(sys.stdout, "encoding", None) or locale.getpreferredencoding(False)
        _standard = Output(
            OutputStream(1, patience, closed=1 in CLOSED_AT_START),
            OutputStream(2, patience, closed=2 in CLOSED_AT_START),
            patience,
            encoding,
        )
    return _standard
