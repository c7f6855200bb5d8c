"""The Gemini CLI source: its local OpenTelemetry file, read for ``gemini_cli.api_response`` records.

Arming sets ``GEMINI_TELEMETRY_ENABLED=true``, ``GEMINI_TELEMETRY_TARGET=local`` and
``GEMINI_TELEMETRY_OUTFILE`` to a file in the start's private directory (the file holds the
prompts and replies too: it never leaves that directory, which is removed with the source). The
CLI exports logs in batches every 5 s, and a turn's records are emitted before its answer, so they
are all in the file at most 5 s after it; :attr:`GeminiSource.window_s` allows a second more.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Final

from .source import Armed, Source, basename
from .telemetry import frame_objects, token_record

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .telemetry import TokenRecord

__all__ = ["GeminiSource"]

READ_CHUNK: Final = 1 << 20
MAX_READ_PER_CALL: Final = 64 << 20
"""Bytes one read takes at most: a runtime that writes without end cannot hold a turn's wait."""
MAX_PENDING: Final = 32 << 20
"""A partial object longer than this is given up (skipped up to its end), bounding memory."""
_PROGRAMS: Final = frozenset({"gemini", "gemini.js", "gemini-cli"})


class GeminiSource(Source):
    runtime = "gemini-cli"
    window_s = 6.0

    def names(self, argv: Sequence[str]) -> bool:
        # `gemini`, a path to it, its bundle run by node, or the npm package run by npx.
        return any(basename(arg) in _PROGRAMS or "@google/gemini-cli" in arg for arg in argv)

    def arm(self) -> Armed:
        return _ArmedGemini(self)


class _ArmedGemini(Armed):
    def __init__(self, source: Source) -> None:
        super().__init__(source)
        self.path = self.directory / "telemetry.log"
        self._offset = 0
        self._pending = b""
        self._skipping = False  # inside an object given up for its size: drop up to its end

    @property
    def env(self) -> dict[str, str]:
        return {
            "GEMINI_TELEMETRY_ENABLED": "true",
            "GEMINI_TELEMETRY_TARGET": "local",
            "GEMINI_TELEMETRY_OUTFILE": str(self.path),
        }

    def read(self, session_id: str) -> list[TokenRecord]:
        records: list[TokenRecord] = []
        try:
            # The runtime owns the file: a link or a FIFO put in its place is never followed or
            # waited on, and one call reads a bounded amount (the next call goes on from there).
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return records  # nothing written yet, or not a file we read
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return records
            f.seek(self._offset)
            budget = MAX_READ_PER_CALL
            while budget > 0 and (chunk := f.read(min(READ_CHUNK, budget))):
                budget -= len(chunk)
                self._offset += len(chunk)
                records += self._feed(chunk, session_id)
        return records

    def _feed(self, chunk: bytes, session_id: str) -> list[TokenRecord]:
        data = self._pending + chunk
        if self._skipping:
            end = data.find(b"\n}\n")
            if end < 0:
                self._pending = data[-2:]  # keep what could start the end marker
                return []
            data, self._skipping = data[end + 3 :], False
        objects, used = frame_objects(data)
        self._pending = data[used:]
        if len(self._pending) > MAX_PENDING:
            self._pending, self._skipping = self._pending[-2:], True
        found = (token_record(obj) for obj in objects)
        return [r for r in found if r is not None and r.session_id == session_id]
