"""Normalizer: the session/update variants other than messages and tool calls, silent, unknown and
malformed updates (no I/O)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from remote_acp.protocol.normalize import DETAIL_CAP
from tests.support.normalize import (
    SID,
    SILENT,
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
    update,
)

if TYPE_CHECKING:
    from remote_acp.events import Event

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
