"""Rendering session events for a person (streaming text) or a program (JSON lines).

Whatever the agent sends must never break the output: JSON lines are pure ASCII (every other
character, a lone surrogate included, is escaped), and human output replaces what the stream's
encoding cannot carry. A failed write raises :class:`OutputError` so the run can end cleanly.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import IO, Any

from ..events import Event, Malformed, Notification, OtherMessage, SessionStarted, ToolResult, TurnEnded
from .streams import tolerant

__all__ = ["HumanRenderer", "JsonRenderer", "OutputError", "json_line"]


class OutputError(Exception):
    """Writing the command's output failed; ``broken_pipe`` when its reader went away."""

    def __init__(self, error: OSError) -> None:
        super().__init__(f"cannot write the output: {error}")
        self.broken_pipe = isinstance(error, BrokenPipeError)


def json_line(obj: dict[str, Any]) -> str:
    """``obj`` as one line of ASCII JSON (encodable in any locale, whatever the agent sent)."""
    return json.dumps(obj, ensure_ascii=True, default=str)


def _write(stream: IO[str], text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except OSError as exc:
        raise OutputError(exc) from exc


class JsonRenderer:
    """One JSON object per line on stdout: events, turn results, then the run result."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self._out = tolerant(out or sys.stdout)

    def event(self, event: Event) -> None:
        self.emit(event.to_json())

    def emit(self, obj: dict[str, Any]) -> None:
        _write(self._out, json_line(obj) + "\n")


class HumanRenderer:
    """Agent text streams to stdout as it arrives; notices and progress go to stderr."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None, show_replay: bool = False) -> None:
        self._out = tolerant(out or sys.stdout)
        self._err = tolerant(err or sys.stderr)
        self._show_replay = show_replay
        self._text_open = False

    def _end_text(self) -> None:
        if self._text_open:
            self._text_open = False
            _write(self._out, "\n")

    def note(self, text: str) -> None:
        self._end_text()
        # Notices are diagnostics, like log lines: a stderr that cannot be written (closed, full)
        # loses them but does not fail a run whose output is fine.
        with contextlib.suppress(OSError):
            self._err.write(f"remote-acp: {text}\n")
            self._err.flush()

    def event(self, event: Event) -> None:
        if getattr(event, "replayed", False) and not self._show_replay:
            return
        if isinstance(event, Notification):
            if event.delta is not None:
                self._text_open = True
                _write(self._out, event.delta)
            elif self._text_open:
                self._end_text()  # the streamed message is complete
            else:
                self.note(event.message)
        elif isinstance(event, OtherMessage):
            self.note(event.message)
        elif isinstance(event, ToolResult):
            status = "failed" if event.error else "done"
            self.note(f"tool {event.tool_name} {status} in {event.duration_ms} ms: {event.message}")
        elif isinstance(event, Malformed):
            self.note(
                f"malformed input from the agent: {event.message}" + (f" ({event.detail})" if event.detail else "")
            )
        elif isinstance(event, TurnEnded):
            self._end_text()
        elif isinstance(event, SessionStarted):
            pass
