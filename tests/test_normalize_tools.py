"""Normalizer: tool calls and their updates in, one tool result per call out (no I/O)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from remote_acp.protocol.normalize import TOOL_KINDS, Normalizer
from tests.support.normalize import (
    PID,
    SID,
    FakeClock,
    chunk,
    delta,
    fake_clock,  # noqa: F401  (registered as the fixture `clock`)
    fixed,
    malformed,
    message,
    result,
    run,
    tool_call,
    tool_update,
    update,
)

if TYPE_CHECKING:
    from remote_acp.events import Event

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
