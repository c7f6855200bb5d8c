"""What the normalizer's tests share: session/update params to feed it, the events expected
back (dated :data:`T0`, compared with :func:`fixed`), and a monotonic clock that moves only when
told to (the fixture ``clock``; import :func:`fake_clock` to use it)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from remote_acp.events import Event, Malformed, Notification, OtherMessage, ToolResult
from remote_acp.protocol.normalize import Normalizer

__all__ = [
    "PID",
    "SID",
    "SILENT",
    "T0",
    "FakeClock",
    "chunk",
    "delta",
    "fake_clock",
    "fixed",
    "malformed",
    "message",
    "other",
    "result",
    "run",
    "tool_call",
    "tool_update",
    "update",
]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PID = 4242
SID = "sess-1"

SILENT = [
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
]


def update(variant: Any, /, session_id: Any = SID, **fields: Any) -> dict[str, Any]:
    return {"sessionId": session_id, "update": {"sessionUpdate": variant, **fields}}


def chunk(text: str, message_id: Any = "m1", **fields: Any) -> dict[str, Any]:
    return update("agent_message_chunk", content={"type": "text", "text": text}, messageId=message_id, **fields)


def tool_call(call_id: str, kind: Any = "edit", **fields: Any) -> dict[str, Any]:
    return update("tool_call", toolCallId=call_id, kind=kind, status="pending", title="starting", **fields)


def tool_update(call_id: str, status: str, **fields: Any) -> dict[str, Any]:
    return update("tool_call_update", toolCallId=call_id, status=status, **fields)


def run(updates: list[Any], *, session_id: str | None = SID, flush: bool = False) -> tuple[Normalizer, list[Event]]:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = session_id
    events: list[Event] = []
    for params in updates:
        normalizer.on_update(params, events.append)
    if flush:
        normalizer.flush(events.append)
    return normalizer, events


def fixed(events: list[Event]) -> list[Event]:
    """The events with their timestamps replaced, for exact comparison of everything else."""
    return [dataclasses.replace(event, timestamp=T0) for event in events]


def delta(text: str, *, replayed: bool = False, session_id: str | None = SID) -> Notification:
    return Notification(timestamp=T0, pid=PID, session_id=session_id, message="", delta=text, replayed=replayed)


def message(text: str, *, replayed: bool = False, session_id: str | None = SID) -> Notification:
    return Notification(timestamp=T0, pid=PID, session_id=session_id, message=text, replayed=replayed)


def other(text: str, *, replayed: bool = False) -> OtherMessage:
    return OtherMessage(timestamp=T0, pid=PID, session_id=SID, message=text, replayed=replayed)


def malformed(text: str, detail: str = "", *, session_id: str | None = SID) -> Malformed:
    return Malformed(timestamp=T0, pid=PID, session_id=session_id, message=text, detail=detail)


def result(
    call_id: str,
    tool: str,
    *,
    error: bool = False,
    title: str = "starting",
    duration_ms: int = 0,
    replayed: bool = False,
) -> ToolResult:
    return ToolResult(
        timestamp=T0,
        pid=PID,
        session_id=SID,
        tool_name=tool,
        tool_call_id=call_id,
        duration_ms=duration_ms,
        error=error,
        message=title,
        replayed=replayed,
    )


class FakeClock:
    """A monotonic clock that advances only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(name="clock")
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """``time.monotonic`` replaced by a :class:`FakeClock` for the test."""
    fake = FakeClock()
    monkeypatch.setattr(time, "monotonic", fake)
    return fake
