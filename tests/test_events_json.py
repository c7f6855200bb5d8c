"""Events: frozen records with a stable JSON form (type first, ISO timestamps with Z)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from remote_acp.errors import ErrorKind
from remote_acp.events import (
    TERMINAL_EVENTS,
    Event,
    LinkLost,
    LinkRestored,
    Malformed,
    Notification,
    OtherMessage,
    SessionStarted,
    TokenLowerBound,
    TokenUsage,
    ToolResult,
    TurnCancelled,
    TurnCompleted,
    TurnEnded,
    TurnFailed,
    TurnInputRequired,
    TurnNotStarted,
    TurnTimedOut,
    utc_now,
)

TS = datetime(2026, 11, 30, 5, 0, 0, 123456, tzinfo=UTC)
TS_TEXT = "2026-11-30T05:00:00.123456Z"
BASE: dict[str, Any] = {"timestamp": TS, "pid": 4242, "session_id": "sess-1"}


def test_notification_json_matches_the_documented_example() -> None:
    event = Notification(
        timestamp=datetime(2026, 11, 30, 5, 0, tzinfo=UTC),
        pid=4242,
        session_id="sess-1",
        message="",
        delta="Hello",
    )
    assert event.to_json() == {
        "type": "notification",
        "timestamp": "2026-11-30T05:00:00.000000Z",
        "pid": 4242,
        "session_id": "sess-1",
        "message": "",
        "delta": "Hello",
        "replayed": False,
    }


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(
            SessionStarted(**BASE),
            {"type": "session_started", "timestamp": TS_TEXT, "pid": 4242, "session_id": "sess-1"},
            id="session_started",
        ),
        pytest.param(
            Notification(**BASE, message="whole reply"),
            {
                "type": "notification",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "whole reply",
                "delta": None,
                "replayed": False,
            },
            id="notification-message",
        ),
        pytest.param(
            OtherMessage(**BASE, message="plan update", replayed=True),
            {
                "type": "other_message",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "plan update",
                "replayed": True,
            },
            id="other_message",
        ),
        pytest.param(
            ToolResult(
                **BASE,
                tool_name="edit",
                tool_call_id="call-1",
                duration_ms=1250,
                error=False,
                message="Edit a.py",
            ),
            {
                "type": "tool_result",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "tool_name": "edit",
                "tool_call_id": "call-1",
                "duration_ms": 1250,
                "error": False,
                "message": "Edit a.py",
                "replayed": False,
            },
            id="tool_result",
        ),
        pytest.param(
            TokenUsage(
                **BASE, model="gemini-3.8-flash", input_tokens=10, output_tokens=5, cache_read_tokens=2, total_tokens=15
            ),
            {
                "type": "token_usage",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "model": "gemini-3.8-flash",
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_read_tokens": 2,
                "total_tokens": 15,
            },
            id="token_usage",
        ),
        pytest.param(
            TokenLowerBound(**BASE, input_tokens=10, output_tokens=5, source="_meta.quota.token_count"),
            {
                "type": "token_lower_bound",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "input_tokens": 10,
                "output_tokens": 5,
                "source": "_meta.quota.token_count",
            },
            id="token_lower_bound",
        ),
        pytest.param(
            LinkLost(**BASE, message="the link to the host was lost (exit status 255); reconnecting"),
            {
                "type": "link_lost",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "the link to the host was lost (exit status 255); reconnecting",
            },
            id="link_lost",
        ),
        pytest.param(
            LinkRestored(**BASE, message="the link to the host is back after 1200 ms", down_ms=1200),
            {
                "type": "link_restored",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "the link to the host is back after 1200 ms",
                "down_ms": 1200,
            },
            id="link_restored",
        ),
        pytest.param(
            Malformed(timestamp=TS, pid=None, session_id=None, message="the line is not valid JSON", detail="{x"),
            {
                "type": "malformed",
                "timestamp": TS_TEXT,
                "pid": None,
                "session_id": None,
                "message": "the line is not valid JSON",
                "detail": "{x",
            },
            id="malformed",
        ),
        pytest.param(
            TurnCompleted(**BASE, message="the agent completed the turn", stop_reason="end_turn"),
            {
                "type": "turn_completed",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "the agent completed the turn",
                "error_kind": None,
                "stop_reason": "end_turn",
            },
            id="turn_completed",
        ),
        pytest.param(
            TurnFailed(**BASE, message="refused", error_kind=ErrorKind.TURN_REFUSED, stop_reason="refusal"),
            {
                "type": "turn_failed",
                "timestamp": TS_TEXT,
                "pid": 4242,
                "session_id": "sess-1",
                "message": "refused",
                "error_kind": "turn_refused",
                "stop_reason": "refusal",
            },
            id="turn_failed",
        ),
    ],
)
def test_json_form(event: Event, expected: dict[str, Any]) -> None:
    got = event.to_json()
    assert got == expected
    assert list(got) == list(expected)  # the key order is part of the stable form
    assert json.loads(json.dumps(got)) == expected


@pytest.mark.parametrize(
    ("cls", "type_name"),
    [
        (TurnCompleted, "turn_completed"),
        (TurnFailed, "turn_failed"),
        (TurnCancelled, "turn_cancelled"),
        (TurnTimedOut, "turn_timed_out"),
        (TurnInputRequired, "turn_input_required"),
        (TurnNotStarted, "turn_not_started"),
    ],
)
def test_terminal_event_types(cls: type[TurnEnded], type_name: str) -> None:
    event = cls(**BASE, message="m", error_kind=ErrorKind.TURN_FAILED)
    assert cls.type == type_name
    assert list(event.to_json()) == [
        "type",
        "timestamp",
        "pid",
        "session_id",
        "message",
        "error_kind",
        "stop_reason",
    ]
    assert event.to_json()["type"] == type_name


def test_terminal_events() -> None:
    assert TERMINAL_EVENTS == (
        TurnCompleted,
        TurnFailed,
        TurnCancelled,
        TurnTimedOut,
        TurnInputRequired,
        TurnNotStarted,
    )
    assert all(issubclass(cls, TurnEnded) for cls in TERMINAL_EVENTS)


def test_type_is_not_a_field() -> None:
    assert "type" not in {f.name for f in dataclasses.fields(Notification)}
    assert Notification.type == "notification"


def test_type_comes_first_then_the_common_fields() -> None:
    for event in [SessionStarted(**BASE), Malformed(**BASE, message="x")]:
        assert list(event.to_json())[:4] == ["type", "timestamp", "pid", "session_id"]


@pytest.mark.parametrize(
    ("timestamp", "text"),
    [
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05.000000Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=UTC), "2026-01-02T03:04:05.000007Z"),
        (datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "1999-12-31T23:59:59.999999Z"),
    ],
)
def test_timestamp_is_iso_8601_with_z(timestamp: datetime, text: str) -> None:
    assert SessionStarted(timestamp=timestamp, pid=1, session_id=None).to_json()["timestamp"] == text


def test_aware_timestamp_in_another_zone_is_rendered_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    event = SessionStarted(timestamp=datetime(2026, 1, 1, 12, 0, tzinfo=plus_two), pid=1, session_id=None)
    assert event.to_json()["timestamp"] == "2026-01-01T10:00:00.000000Z"


def test_utc_now_is_aware_utc_and_current() -> None:
    before = datetime.now(UTC)
    now = utc_now()
    after = datetime.now(UTC)
    assert now.tzinfo is UTC
    assert before <= now <= after


def test_events_are_frozen() -> None:
    event = Notification(**BASE, message="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.message = "y"  # type: ignore[misc]


def test_events_compare_by_value() -> None:
    assert Notification(**BASE, message="x") == Notification(**BASE, message="x")
    assert Notification(**BASE, message="x") != Notification(**BASE, message="x", replayed=True)
    started: Event = SessionStarted(**BASE)
    assert started != Notification(**BASE, message="")


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        SessionStarted(TS, 1, "s")  # type: ignore[call-arg]


def test_defaults() -> None:
    assert Notification(**BASE, message="m").delta is None
    assert Notification(**BASE, message="m").replayed is False
    assert OtherMessage(**BASE, message="m").replayed is False
    assert Malformed(**BASE, message="m").detail == ""
    ended = TurnCancelled(**BASE, message="the turn was cancelled")
    assert (ended.error_kind, ended.stop_reason) == (None, None)
