"""Normalizer: updates scoped to the session, and replayed history marked as such (no I/O)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remote_acp.protocol.normalize import Normalizer
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
    other,
    result,
    run,
    tool_call,
    tool_update,
    update,
)

if TYPE_CHECKING:
    from remote_acp.events import Event

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
