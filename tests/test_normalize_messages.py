"""Normalizer: agent message chunks in, deltas and whole capped messages out (no I/O)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest

from tests.support.normalize import chunk, delta, fixed, malformed, message, run, update

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
