"""Normalizer: its exported helpers, and the property that no sequence of session/update params
crashes it or yields an event past its bounds (no I/O). The variants, one by one, are in the
test_normalize_* modules."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_acp.events import Event, Malformed, Notification, OtherMessage, ToolResult
from remote_acp.protocol.normalize import DETAIL_CAP, MESSAGE_CAP, TOOL_KINDS, Normalizer, cap_text, normalize_tool_kind
from tests.support.normalize import SILENT

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
