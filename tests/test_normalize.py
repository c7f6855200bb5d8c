"""Normalizer: session/update params in, exact normalized events out (no I/O)."""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_acp.events import Event, Malformed, Notification, OtherMessage, ToolResult
from remote_acp.protocol.normalize import (
    DETAIL_CAP,
    MESSAGE_CAP,
    TOOL_KINDS,
    Normalizer,
    cap_text,
    normalize_tool_kind,
)

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


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(time, "monotonic", fake)
    return fake


# -- helpers exported by the module -------------------------------------------------------------


def test_constants() -> None:
    assert MESSAGE_CAP == 500
    assert (
        frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})
        == TOOL_KINDS
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("short", "short"),
        ("a" * 500, "a" * 500),
        ("a" * 501, "a" * 499 + "…"),
        ("a" * 10_000, "a" * 499 + "…"),
        ("😀" * 501, "😀" * 499 + "…"),
    ],
)
def test_cap_text(text: str, expected: str) -> None:
    assert cap_text(text) == expected
    assert len(cap_text(text)) <= 500


def test_cap_text_with_a_custom_cap() -> None:
    assert cap_text("abcdef", 4) == "abc…"
    assert cap_text("abcd", 4) == "abcd"


@pytest.mark.parametrize("kind", sorted(TOOL_KINDS))
def test_known_tool_kinds_are_kept(kind: str) -> None:
    assert normalize_tool_kind(kind) == kind


@pytest.mark.parametrize("kind", [None, "", "READ", "Read", "write", "unknown", 5, True, 1.5])
def test_unknown_tool_kinds_become_other(kind: Any) -> None:
    assert normalize_tool_kind(kind) == "other"


# -- agent messages -----------------------------------------------------------------------------


def test_text_chunk_yields_a_delta_notification_with_empty_message() -> None:
    normalizer, events = run([chunk("Hello")])
    assert fixed(events) == [delta("Hello")]
    assert normalizer.last_message == ""


def test_chunks_of_one_message_are_reported_whole_on_flush() -> None:
    normalizer, events = run([chunk("Hel"), chunk("lo, "), chunk("world")], flush=True)
    assert fixed(events) == [delta("Hel"), delta("lo, "), delta("world"), message("Hello, world")]
    assert normalizer.last_message == "Hello, world"


def test_whole_message_is_dated_by_its_last_chunk() -> None:
    _, events = run([chunk("a"), chunk("b")], flush=True)
    assert events[2].timestamp == events[1].timestamp
    assert events[0].timestamp <= events[1].timestamp
    assert all(event.timestamp.tzinfo is UTC for event in events)


def test_chunk_with_another_message_id_ends_the_message() -> None:
    normalizer, events = run([chunk("one", "m1"), chunk("two", "m2")])
    assert fixed(events) == [delta("one"), message("one"), delta("two")]
    assert normalizer.last_message == "one"
    normalizer.flush(events.append)
    assert fixed(events)[3:] == [message("two")]
    assert normalizer.last_message == "two"


def test_chunks_without_message_id_form_one_message() -> None:
    _, events = run([chunk("a", None), chunk("b", None)], flush=True)
    assert fixed(events) == [delta("a"), delta("b"), message("ab")]


def test_message_id_appearing_after_chunks_without_one_starts_a_new_message() -> None:
    _, events = run([chunk("a", None), chunk("b", "m1")], flush=True)
    assert fixed(events) == [delta("a"), message("a"), delta("b"), message("b")]


def test_returning_to_an_earlier_message_id_starts_a_new_message() -> None:
    _, events = run([chunk("a", "m1"), chunk("b", "m2"), chunk("c", "m1")], flush=True)
    assert fixed(events) == [delta("a"), message("a"), delta("b"), message("b"), delta("c"), message("c")]


def test_user_message_chunk_ends_the_message_without_an_event_of_its_own() -> None:
    user = update("user_message_chunk", content={"type": "text", "text": "hi"})
    _, events = run([chunk("a"), user, chunk("b")], flush=True)
    assert fixed(events) == [delta("a"), message("a"), delta("b"), message("b")]


def test_user_message_chunk_alone_yields_nothing() -> None:
    _, events = run([update("user_message_chunk", content={"type": "text", "text": "hi"})], flush=True)
    assert events == []


def test_message_is_capped_at_500_runes_with_an_ellipsis() -> None:
    text = "x" * 300 + "y" * 300
    normalizer, events = run([chunk(text[:300]), chunk(text[300:])], flush=True)
    assert fixed(events) == [delta("x" * 300), delta("y" * 300), message("x" * 300 + "y" * 199 + "…")]
    assert len(normalizer.last_message) == 500
    assert normalizer.last_message == "x" * 300 + "y" * 199 + "…"


def test_message_of_exactly_500_runes_is_not_cut() -> None:
    normalizer, events = run([chunk("é" * 250), chunk("é" * 250)], flush=True)
    assert fixed(events)[-1] == message("é" * 500)
    assert normalizer.last_message == "é" * 500


def test_message_of_501_runes_is_cut_to_500() -> None:
    _, events = run([chunk("é" * 501)], flush=True)
    assert fixed(events) == [delta("é" * 501), message("é" * 499 + "…")]


def test_many_small_chunks_are_capped_too() -> None:
    normalizer, events = run([chunk("ab") for _ in range(1000)], flush=True)
    assert len(events) == 1001
    assert fixed(events)[-1] == message("ab" * 249 + "a…")
    assert normalizer.last_message == "ab" * 249 + "a…"


def test_delta_carries_the_whole_chunk_even_past_the_cap() -> None:
    _, events = run([chunk("z" * 10_000)], flush=True)
    assert fixed(events) == [delta("z" * 10_000), message("z" * 499 + "…")]


def test_empty_text_chunk_still_counts_as_a_chunk() -> None:
    _, events = run([chunk(""), chunk("a")], flush=True)
    assert fixed(events) == [delta(""), delta("a"), message("a")]


def test_flush_without_an_open_message_yields_nothing() -> None:
    normalizer, events = run([], flush=True)
    assert events == []
    normalizer.on_update(chunk("a"), events.append)
    normalizer.flush(events.append)
    normalizer.flush(events.append)
    assert fixed(events) == [delta("a"), message("a")]


def test_message_after_a_flush_starts_fresh_even_with_the_same_id() -> None:
    normalizer, events = run([chunk("a")], flush=True)
    normalizer.on_update(chunk("b"), events.append)
    normalizer.flush(events.append)
    assert fixed(events) == [delta("a"), message("a"), delta("b"), message("b")]
    assert normalizer.last_message == "b"


@pytest.mark.parametrize(
    "content",
    [
        {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"},
        {"type": "text"},
        {"type": "text", "text": 5},
        {"type": "text", "text": None},
        {"text": "no type"},
        "just a string",
        None,
    ],
)
def test_chunk_that_is_not_text_is_malformed(content: Any) -> None:
    _, events = run([update("agent_message_chunk", content=content, messageId="m1")])
    assert fixed(events) == [malformed("agent sent a message chunk this client does not render")]


def test_chunk_without_content_is_malformed() -> None:
    _, events = run([update("agent_message_chunk", messageId="m1")])
    assert fixed(events) == [malformed("agent sent a message chunk this client does not render")]


def test_non_text_chunk_ends_the_open_message() -> None:
    image = update("agent_message_chunk", content={"type": "image", "data": "x"}, messageId="m1")
    _, events = run([chunk("a"), image, chunk("b")], flush=True)
    assert fixed(events) == [
        delta("a"),
        message("a"),
        malformed("agent sent a message chunk this client does not render"),
        delta("b"),
        message("b"),
    ]


# -- other variants -----------------------------------------------------------------------------


def test_thought_chunk_is_a_reasoning_block() -> None:
    thought = update("agent_thought_chunk", content={"type": "text", "text": "hmm"})
    _, events = run([thought])
    assert fixed(events) == [other("reasoning block")]


def test_plan_is_a_plan_update() -> None:
    plan = update("plan", entries=[{"content": "step", "priority": "high", "status": "pending"}])
    _, events = run([plan])
    assert fixed(events) == [other("plan update")]


def test_thought_and_plan_end_the_open_message() -> None:
    thought = update("agent_thought_chunk", content={"type": "text", "text": "hmm"})
    _, events = run([chunk("a"), thought, chunk("b"), update("plan", entries=[])], flush=True)
    assert fixed(events) == [
        delta("a"),
        message("a"),
        other("reasoning block"),
        delta("b"),
        message("b"),
        other("plan update"),
    ]


def test_other_messages_do_not_replace_the_last_message() -> None:
    normalizer, _ = run([chunk("reply"), update("plan", entries=[])])
    assert normalizer.last_message == "reply"


@pytest.mark.parametrize("kind", SILENT)
def test_silent_variants_yield_no_event(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp.events")
    _, events = run([update(kind, extra={"a": 1}), update(kind)])
    assert events == []
    debug = [r for r in caplog.records if r.name == "remote_acp.events" and r.levelno == logging.DEBUG]
    assert [r.getMessage() for r in debug] == ["session update without an event"] * 2


@pytest.mark.parametrize("kind", SILENT)
def test_silent_variants_do_not_end_the_message(kind: str) -> None:
    _, events = run([chunk("a"), update(kind, used=1, size=2), chunk("b")], flush=True)
    assert fixed(events) == [delta("a"), delta("b"), message("ab")]


def test_unknown_variant_is_one_malformed_event_per_update_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp.events")
    _, events = run([update("vendor_thing", x=1), update("vendor_thing"), update("other_vendor_thing")])
    text = "received a session update of an unrecognized kind"
    assert fixed(events) == [
        malformed(text, "vendor_thing"),
        malformed(text, "vendor_thing"),
        malformed(text, "other_vendor_thing"),
    ]
    logged = [r for r in caplog.records if r.getMessage() == "unrecognized session update"]
    assert len(logged) == 1
    assert logged[0].levelno == logging.DEBUG


def test_unknown_variant_ends_the_open_message() -> None:
    _, events = run([chunk("a"), update("vendor_thing"), chunk("b")])
    assert fixed(events) == [
        delta("a"),
        message("a"),
        malformed("received a session update of an unrecognized kind", "vendor_thing"),
        delta("b"),
    ]


def test_unknown_variant_detail_is_bounded() -> None:
    _, events = run([update("v" * 1000)])
    cut = "v" * (DETAIL_CAP - 1) + "…"
    assert fixed(events) == [malformed("received a session update of an unrecognized kind", cut)]


@pytest.mark.parametrize(("kind", "detail"), [(None, "None"), (5, "5"), (True, "True")])
def test_missing_or_non_string_discriminator_is_unrecognized(kind: Any, detail: str) -> None:
    _, events = run([update(kind)])
    assert fixed(events) == [malformed("received a session update of an unrecognized kind", detail)]


def test_update_without_discriminator_is_unrecognized() -> None:
    _, events = run([{"sessionId": SID, "update": {"content": {}}}])
    assert fixed(events) == [malformed("received a session update of an unrecognized kind", "None")]


@pytest.mark.parametrize("params", [None, [], ["x"], "text", 5, True])
def test_params_that_are_not_an_object_are_malformed(params: Any) -> None:
    _, events = run([params])
    assert fixed(events) == [malformed("received a session update without parameters")]


@pytest.mark.parametrize("params", [{"sessionId": SID}, {"sessionId": SID, "update": None}, {"update": [1]}])
def test_params_without_an_update_object_are_malformed(params: Any) -> None:
    _, events = run([params], session_id=None)
    assert fixed(events) == [malformed("received a session update without an update object", session_id=None)]


def test_unknown_fields_and_meta_are_tolerated() -> None:
    params = {
        "sessionId": SID,
        "_meta": {"usage": {"inputTokens": 3}},
        "extra": [1, 2],
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "_meta": {"vendor": True},
            "unknownField": {"x": 1},
            "content": {"type": "text", "text": "hi", "_meta": {}, "annotations": {"priority": 1}},
        },
    }
    _, events = run([params], flush=True)
    assert fixed(events) == [delta("hi"), message("hi")]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param(
            update(["x"]),
            [malformed("received a session update of an unrecognized kind", "a JSON array")],
            id="list-discriminator",
        ),
        pytest.param(
            update({"a": 1}),
            [malformed("received a session update of an unrecognized kind", "a JSON object")],
            id="object-discriminator",
        ),
        pytest.param(
            update("tool_call", toolCallId="t1", kind=["edit"], status="completed"),
            [result("t1", "other", title="")],
            id="list-tool-kind",
        ),
        pytest.param(
            update("tool_call", toolCallId="t1", kind="edit", status={"s": 1}),
            [],
            id="object-tool-status",
        ),
    ],
)
def test_unhashable_values_do_not_crash(params: dict[str, Any], expected: list[Event], clock: FakeClock) -> None:
    _, events = run([params])
    assert fixed(events) == expected


# -- tool calls ---------------------------------------------------------------------------------


def test_tool_call_yields_one_result_at_its_terminal_update(clock: FakeClock) -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    events: list[Event] = []
    normalizer.on_update(tool_call("t1", "edit"), events.append)
    assert events == []
    clock.now += 0.5
    normalizer.on_update(tool_update("t1", "in_progress"), events.append)
    assert events == []
    clock.now += 0.75
    normalizer.on_update(tool_update("t1", "completed", title="Edit foo.py"), events.append)
    assert fixed(events) == [result("t1", "edit", title="Edit foo.py", duration_ms=1250)]


def test_failed_tool_call_has_the_error_flag(clock: FakeClock) -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    events: list[Event] = []
    normalizer.on_update(tool_call("t1", "execute"), events.append)
    clock.now += 2.0
    normalizer.on_update(tool_update("t1", "failed", title="npm test"), events.append)
    assert fixed(events) == [result("t1", "execute", error=True, title="npm test", duration_ms=2000)]


def test_tool_result_uses_the_latest_title_seen(clock: FakeClock) -> None:
    # Updates carry only what changed: without a title on the terminal update, the latest one
    # seen (from the begin or an intermediate update) names the call.
    _, events = run([tool_call("t1", "read"), tool_update("t1", "completed")])
    assert fixed(events) == [result("t1", "read", title="starting")]
    _, events = run([tool_call("t2", "read"), tool_update("t2", "completed", title=42)])
    assert fixed(events) == [result("t2", "read", title="starting")]
    _, events = run(
        [
            tool_call("t3", "edit"),
            tool_update("t3", "in_progress", title="Writing to out.txt"),
            tool_update("t3", "failed"),
        ]
    )
    assert fixed(events) == [result("t3", "edit", error=True, title="Writing to out.txt")]
    _, events = run([tool_call("t4", "read"), tool_update("t4", "completed", title="Read a.txt")])
    assert fixed(events) == [result("t4", "read", title="Read a.txt")]


def test_tool_result_title_is_capped(clock: FakeClock) -> None:
    _, events = run([tool_call("t1", "read"), tool_update("t1", "completed", title="t" * 900)])
    assert fixed(events) == [result("t1", "read", title="t" * 499 + "…")]


@pytest.mark.parametrize("kind", sorted(TOOL_KINDS))
def test_tool_kinds_are_reported(kind: str, clock: FakeClock) -> None:
    _, events = run([tool_call("t1", kind), tool_update("t1", "completed")])
    assert fixed(events) == [result("t1", kind)]


@pytest.mark.parametrize("kind", [None, "Edit", "write", "", 3])
def test_unknown_tool_kind_is_other(kind: Any, clock: FakeClock) -> None:
    _, events = run([tool_call("t1", kind), tool_update("t1", "completed")])
    assert fixed(events) == [result("t1", "other")]


def test_absent_tool_kind_is_other(clock: FakeClock) -> None:
    _, events = run([update("tool_call", toolCallId="t1"), tool_update("t1", "completed")])
    assert fixed(events) == [result("t1", "other", title="")]


def test_kind_given_in_an_update_replaces_the_begin_kind(clock: FakeClock) -> None:
    _, events = run(
        [
            tool_call("t1", "read"),
            tool_update("t1", "in_progress", kind="edit"),
            tool_update("t1", "completed"),
        ]
    )
    assert fixed(events) == [result("t1", "edit")]


def test_kind_on_the_terminal_update_is_used(clock: FakeClock) -> None:
    _, events = run([tool_call("t1", "read"), tool_update("t1", "completed", kind="bogus")])
    assert fixed(events) == [result("t1", "other")]


def test_update_without_a_matching_begin_yields_nothing(clock: FakeClock) -> None:
    _, events = run([tool_update("nope", "completed", title="x"), tool_update("nope", "failed")])
    assert events == []


def test_second_terminal_update_yields_nothing(clock: FakeClock) -> None:
    _, events = run([tool_call("t1"), tool_update("t1", "completed"), tool_update("t1", "failed")])
    assert fixed(events) == [result("t1", "edit")]


@pytest.mark.parametrize("status", ["pending", "in_progress", "cancelled", None, "COMPLETED"])
def test_non_terminal_statuses_yield_nothing(status: Any, clock: FakeClock) -> None:
    _, events = run([tool_call("t1"), update("tool_call_update", toolCallId="t1", status=status)])
    assert events == []


def test_tool_call_announced_already_finished_gets_its_result(clock: FakeClock) -> None:
    finished = update("tool_call", toolCallId="t1", kind="search", status="completed", title="grep x")
    failed = update("tool_call", toolCallId="t2", kind="fetch", status="failed", title="GET /")
    _, events = run([finished, failed])
    assert fixed(events) == [
        result("t1", "search", title="grep x"),
        result("t2", "fetch", error=True, title="GET /"),
    ]


@pytest.mark.parametrize("call_id", [None, 5, ["t1"]])
def test_tool_call_without_a_string_id_is_malformed(call_id: Any) -> None:
    _, events = run([update("tool_call", toolCallId=call_id, kind="read")])
    assert fixed(events) == [malformed("received a tool call without a tool call id")]


def test_tool_call_without_an_id_is_malformed() -> None:
    _, events = run([update("tool_call", kind="read")])
    assert fixed(events) == [malformed("received a tool call without a tool call id")]


def test_concurrent_tool_calls_are_tracked_separately(clock: FakeClock) -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    events: list[Event] = []
    normalizer.on_update(tool_call("t1", "read"), events.append)
    clock.now += 1.0
    normalizer.on_update(tool_call("t2", "execute"), events.append)
    clock.now += 0.1
    normalizer.on_update(tool_update("t2", "completed", title="ls"), events.append)
    clock.now += 0.2
    normalizer.on_update(tool_update("t1", "failed", title="cat"), events.append)
    assert fixed(events) == [
        result("t2", "execute", title="ls", duration_ms=100),
        result("t1", "read", error=True, title="cat", duration_ms=1300),
    ]


def test_tool_begin_does_not_end_the_message_but_its_result_does(clock: FakeClock) -> None:
    _, events = run([chunk("a"), tool_call("t1", "read"), chunk("b"), tool_update("t1", "completed"), chunk("c")])
    assert fixed(events) == [delta("a"), delta("b"), message("ab"), result("t1", "read"), delta("c")]


def test_non_terminal_tool_update_does_not_end_the_message(clock: FakeClock) -> None:
    _, events = run([tool_call("t1"), chunk("a"), tool_update("t1", "in_progress"), chunk("b")], flush=True)
    assert fixed(events) == [delta("a"), delta("b"), message("ab")]


# -- session scoping and replay -----------------------------------------------------------------


def test_events_carry_pid_and_session_id() -> None:
    normalizer = Normalizer(pid=77)
    normalizer.session_id = "abc"
    events: list[Event] = []
    normalizer.on_update(chunk("x", session_id="abc"), events.append)
    assert (events[0].pid, events[0].session_id) == (77, "abc")


def test_normalizer_defaults() -> None:
    normalizer = Normalizer()
    assert normalizer.pid is None
    assert normalizer.session_id is None
    assert normalizer.replaying is False
    assert normalizer.replay_chunks == 0
    assert normalizer.last_message == ""


def test_update_for_a_foreign_session_is_dropped() -> None:
    foreign = [
        chunk("x", session_id="other"),
        update("plan", session_id="other", entries=[]),
        update("vendor_thing", session_id="other"),
        update("tool_call", session_id="other"),
    ]
    _, events = run(foreign, flush=True)
    assert events == []


def test_foreign_update_does_not_end_the_message() -> None:
    foreign = update("agent_thought_chunk", session_id="other", content={"type": "text", "text": "x"})
    _, events = run([chunk("a"), foreign, chunk("b")], flush=True)
    assert fixed(events) == [delta("a"), delta("b"), message("ab")]


def test_foreign_tool_update_does_not_close_our_call(clock: FakeClock) -> None:
    foreign = update("tool_call_update", "other", toolCallId="t1", status="completed")
    _, events = run([tool_call("t1", "read"), foreign, tool_update("t1", "failed")])
    assert fixed(events) == [result("t1", "read", error=True)]


def test_updates_before_the_session_id_is_known_are_accepted() -> None:
    _, events = run([chunk("a", session_id="whatever"), chunk("b", session_id=None)], session_id=None, flush=True)
    assert fixed(events) == [
        delta("a", session_id=None),
        delta("b", session_id=None),
        message("ab", session_id=None),
    ]


def test_replayed_history_is_marked(clock: FakeClock) -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    normalizer.replaying = True
    events: list[Event] = []
    for params in [
        update("user_message_chunk", content={"type": "text", "text": "question"}),
        chunk("old answer"),
        update("agent_thought_chunk", content={"type": "text", "text": "t"}),
        tool_call("t1", "read"),
        tool_update("t1", "completed", title="cat"),
        chunk("more"),
    ]:
        normalizer.on_update(params, events.append)
    normalizer.flush(events.append)
    assert fixed(events) == [
        delta("old answer", replayed=True),
        message("old answer", replayed=True),
        other("reasoning block", replayed=True),
        result("t1", "read", title="cat", replayed=True),
        delta("more", replayed=True),
        message("more", replayed=True),
    ]
    assert normalizer.replay_chunks == 3  # user and agent message chunks, not thoughts
    assert normalizer.last_message == "more"


def test_replayed_message_ends_when_replay_ends_and_keeps_its_date() -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    normalizer.replaying = True
    events: list[Event] = []
    normalizer.on_update(chunk("old", "m1"), events.append)
    normalizer.replaying = False
    normalizer.on_update(chunk("new", "m1"), events.append)
    normalizer.flush(events.append)
    assert fixed(events) == [
        delta("old", replayed=True),
        message("old", replayed=True),
        delta("new"),
        message("new"),
    ]
    # The replayed message is dated when its chunk arrived, not when the live one did.
    assert events[1].timestamp == events[0].timestamp
    assert events[3].timestamp == events[2].timestamp
    assert normalizer.replay_chunks == 1


def test_message_ends_when_replay_starts() -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    events: list[Event] = []
    normalizer.on_update(chunk("live", "m1"), events.append)
    normalizer.replaying = True
    normalizer.on_update(chunk("old", "m1"), events.append)
    normalizer.flush(events.append)
    assert fixed(events) == [
        delta("live"),
        message("live"),
        delta("old", replayed=True),
        message("old", replayed=True),
    ]


def test_malformed_events_are_emitted_while_replaying() -> None:
    normalizer = Normalizer(pid=PID)
    normalizer.session_id = SID
    normalizer.replaying = True
    events: list[Event] = []
    normalizer.on_update(update("vendor_thing"), events.append)
    assert fixed(events) == [malformed("received a session update of an unrecognized kind", "vendor_thing")]


# -- property: nothing crashes, nothing exceeds its bound ---------------------------------------

REAL_VARIANTS = [
    "agent_message_chunk",
    "user_message_chunk",
    "agent_thought_chunk",
    "plan",
    "tool_call",
    "tool_call_update",
    *SILENT,
]

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6,
)


def _updates() -> st.SearchStrategy[Any]:
    """session/update params: real variants, random names, random or missing fields (lists and
    objects included where a string belongs), non-objects."""
    loose = _json
    discriminator = st.one_of(st.sampled_from(REAL_VARIANTS), st.sampled_from(["vendor_x", ""]), loose)
    text = st.one_of(st.text(max_size=700), st.text(alphabet="ab😀é", min_size=400, max_size=1200))
    content = st.one_of(
        st.fixed_dictionaries(
            {"type": st.one_of(st.just("text"), st.just("image"), _scalars)},
            optional={"text": st.one_of(text, _json), "_meta": _json},
        ),
        _json,
    )
    update_object = st.fixed_dictionaries(
        {"sessionUpdate": discriminator},
        optional={
            "content": content,
            "messageId": st.one_of(st.sampled_from(["m1", "m2", None]), _json),
            "toolCallId": st.one_of(st.sampled_from(["t1", "t2"]), _json),
            "kind": st.one_of(st.sampled_from(sorted(TOOL_KINDS)), loose),
            "status": st.one_of(st.sampled_from(["pending", "in_progress", "completed", "failed"]), loose),
            "title": st.one_of(text, _json),
            "entries": _json,
            "_meta": _json,
        },
    )
    params = st.fixed_dictionaries(
        {"update": st.one_of(update_object, update_object, _json)},
        optional={"sessionId": st.one_of(st.sampled_from(["s1", "s2"]), _json), "_meta": _json},
    )
    return st.one_of(params, params, params, _json)


def _check_sequence(steps: list[tuple[Any, bool, bool]], session_id: str | None) -> None:
    normalizer = Normalizer(pid=1)
    normalizer.session_id = session_id
    events: list[Event] = []
    for params, replaying, flush in steps:
        normalizer.replaying = replaying
        normalizer.on_update(params, events.append)
        if flush:
            normalizer.flush(events.append)
        assert len(normalizer.last_message) <= MESSAGE_CAP
    normalizer.flush(events.append)
    count = len(events)
    normalizer.flush(events.append)
    assert len(events) == count
    for event in events:
        assert event.pid == 1
        assert event.session_id == session_id
        assert event.timestamp.tzinfo is UTC
        if isinstance(event, Notification):
            assert len(event.message) <= MESSAGE_CAP
            if event.delta is not None:
                assert event.message == ""
        elif isinstance(event, ToolResult):
            assert len(event.message) <= MESSAGE_CAP
            assert event.tool_name in TOOL_KINDS
            assert event.duration_ms >= 0
        elif isinstance(event, Malformed):
            assert len(event.detail) <= DETAIL_CAP
        else:
            assert isinstance(event, OtherMessage)
            assert event.message in {"reasoning block", "plan update"}


@given(
    steps=st.lists(st.tuples(_updates(), st.booleans(), st.booleans()), max_size=30),
    session_id=st.sampled_from([None, "s1"]),
)
@settings(max_examples=200, deadline=None)
def test_property_no_update_sequence_crashes_or_exceeds_the_bounds(
    steps: list[tuple[Any, bool, bool]], session_id: str | None
) -> None:
    _check_sequence(steps, session_id)
