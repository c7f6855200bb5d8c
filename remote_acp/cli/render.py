"""Rendering session events for a person (streaming text) or a program (JSON lines)."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from ..events import Event, Malformed, Notification, OtherMessage, SessionStarted, ToolResult, TurnEnded

__all__ = ["HumanRenderer", "JsonRenderer"]


class JsonRenderer:
    """One JSON object per line on stdout: events, turn results, then the run result."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self._out = out or sys.stdout

    def event(self, event: Event) -> None:
        self.emit(event.to_json())

    def emit(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self._out.flush()


class HumanRenderer:
    """Agent text streams to stdout as it arrives; notices and progress go to stderr."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None, show_replay: bool = False) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._show_replay = show_replay
        self._text_open = False

    def _end_text(self) -> None:
        if self._text_open:
            self._out.write("\n")
            self._out.flush()
            self._text_open = False

    def note(self, text: str) -> None:
        self._end_text()
        self._err.write(f"remote-acp: {text}\n")
        self._err.flush()

    def event(self, event: Event) -> None:
        if getattr(event, "replayed", False) and not self._show_replay:
            return
        if isinstance(event, Notification):
            if event.delta is not None:
                self._out.write(event.delta)
                self._out.flush()
                self._text_open = True
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
