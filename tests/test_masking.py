"""Masking and escaping without processes: the masker, streamed text, the live-secret registry and
its logging filter, the log formatters, the malformed-event rate limit and the identifier bounds."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_acp import masking
from remote_acp.cli.logging_setup import JsonFormatter, TextFormatter
from remote_acp.events import Event, Malformed, Notification, ToolResult
from remote_acp.logs import ContextLogger, get_logger
from remote_acp.masking import MASK, Masker, MaskingFilter, StreamMasker, escape_control
from remote_acp.protocol.disposition import disposition_for_stop_reason, shown_stop_reason
from remote_acp.protocol.normalize import (
    DETAIL_CAP,
    MALFORMED_BURST,
    MALFORMED_RATE,
    MESSAGE_CAP,
    TOOL_CALL_ID_BOUND,
    Normalizer,
)
from remote_acp.protocol.ratelimit import TokenBucket
from remote_acp.protocol.wire import SESSION_ID_BOUND, WireError, parse_new_session

SECRET = "sk-live-0123456789abcdef"
OTHER = "hunter2-password"
SID = "sess-1"


def update(variant: Any, /, **fields: Any) -> dict[str, Any]:
    return {"sessionId": SID, "update": {"sessionUpdate": variant, **fields}}


def chunk(text: str, message_id: str = "m1") -> dict[str, Any]:
    return update("agent_message_chunk", content={"type": "text", "text": text}, messageId=message_id)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def normalizer(*secrets: str, clock: Clock | None = None) -> Normalizer:
    n = Normalizer(pid=1, secrets=secrets, clock=clock or Clock())
    n.session_id = SID
    return n


# -- Masker ---------------------------------------------------------------------------------------


def test_mask_replaces_every_secret_longest_first() -> None:
    m = Masker(["abcd", "abcdefgh"])
    assert m.mask("x abcdefgh y abcd z") == f"x {MASK} y {MASK} z"
    assert m.secrets == ("abcdefgh", "abcd")


def test_values_too_short_to_mask_safely_are_ignored() -> None:
    m = Masker(["yes", ""])
    assert not m
    assert m.mask("yes") == "yes"


def test_secrets_with_regex_characters_are_taken_literally() -> None:
    m = Masker(["a.b*c+(d)"])
    assert m.mask("a.b*c+(d) aXbbc(d)") == f"{MASK} aXbbc(d)"


def test_excerpt_masks_before_it_cuts() -> None:
    m = Masker([SECRET])
    text = "x" * 90 + SECRET + "y" * 50
    out = m.excerpt(text, 100)
    assert out == "x" * 90 + MASK + "y" * 6 + "…"
    assert "sk-" not in out


def test_excerpt_of_a_cut_text_drops_the_start_of_a_secret_at_its_end() -> None:
    m = Masker([SECRET])
    assert m.excerpt("abc " + SECRET[:10], 100, cut=True) == "abc …"
    assert m.excerpt("abc " + SECRET[:10], 100) == "abc " + SECRET[:10]  # whole: no secret in it


def test_excerpt_of_a_huge_text_masks_only_a_window_but_never_leaks_a_prefix() -> None:
    m = Masker([SECRET])
    # Masks shrink the text: a secret far past the cap must not slide into it half-masked.
    text = SECRET * 60 + SECRET[:12] + "tail" * 100_000
    out = m.excerpt(text, 100)
    assert len(out) <= 100
    assert out.replace(MASK, "").strip("…") == ""


def test_quote_escapes_control_characters_after_masking_and_stays_bounded() -> None:
    m = Masker([SECRET])
    out = m.quote(f"\x1b[31m{SECRET}\nerror: forged\r" + "\x07" * 500, 200)
    assert out.startswith(f"\\x1b[31m{MASK}\\nerror: forged\\r\\x07")
    assert len(out) <= 200
    assert not any(ord(c) < 0x20 for c in out)


@given(
    text=st.text(alphabet="sk-liv0123abXY \n", max_size=200),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_property_streamed_text_is_masked_as_a_whole(text: str, cuts: list[int]) -> None:
    secrets = ["sk-live-01", "sk-li", "ab0ab"]
    stream = StreamMasker(Masker(secrets))
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    out = "".join(stream.feed(text[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)) + stream.finish()
    assert out == Masker(secrets).mask(text)


def test_stream_masker_holds_only_what_could_still_become_a_secret() -> None:
    stream = StreamMasker(Masker([SECRET]))
    assert stream.feed("key is sk-li") == "key is "
    assert stream.holding
    assert stream.feed("ve-0123") == ""
    assert stream.feed("456789abcdef and more") == f"{MASK} and more"
    assert stream.feed(" sk-x") == " sk-x"
    assert not stream.holding


def test_secret_values_pick_secret_looking_names() -> None:
    env = {"OPENAI_API_KEY": SECRET, "GH_TOKEN": OTHER, "HOME": "/home/someone", "SHORT_KEY": "abc"}
    assert masking.secret_values(env) == (SECRET, OTHER)
    assert masking.secret_values({"ANYTHING": "value1"}, any_name=True) == ("value1",)


# -- escaping -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain text, tabs\tstay", "plain text, tabs\tstay"),
        ("a\nb", "a\\nb"),
        ("a\rb", "a\\rb"),
        ("\x1b[2J\x1b]0;title\x07", "\\x1b[2J\\x1b]0;title\\x07"),
        ("del\x7f c1\x9b nel\x85", "del\\x7f c1\\x9b nel\\x85"),
        ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
        ("bidi\u202egnp.exe", "bidi\\u202egnp.exe"),
        ("non-ASCII letters stay: é ü 日本", "non-ASCII letters stay: é ü 日本"),
    ],
)
def test_escape_control(text: str, escaped: str) -> None:
    assert escape_control(text) == escaped


def test_escape_control_can_keep_newlines_but_never_carriage_returns() -> None:
    assert escape_control("one\ntwo\rthree\x1b", keep_newlines=True) == "one\ntwo\\rthree\\x1b"


# -- the live registry and the logging filter -----------------------------------------------------


def record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord("remote_acp.test", logging.WARNING, __file__, 1, msg, args or None, None)
    rec.__dict__.update(extra)
    return rec


def test_registry_counts_sessions_holding_the_same_secret() -> None:
    masking.register([SECRET])
    masking.register([SECRET, OTHER])
    assert set(masking.live_masker().secrets) == {SECRET, OTHER}
    masking.unregister([SECRET, OTHER])
    assert masking.live_masker().secrets == (SECRET,)  # the first session still holds it
    masking.unregister([SECRET])
    assert not masking.live_masker()


def test_filter_masks_message_arguments_and_extras_of_live_secrets() -> None:
    rec = record("agent said %s and %r", SECRET, {"k": OTHER}, text=f"x{SECRET}", data={"v": SECRET}, n=3)
    with masking.registered([SECRET, OTHER]):
        assert MaskingFilter().filter(rec)
    assert rec.getMessage() == f"agent said {MASK} and {{'k': '{MASK}'}}"
    assert rec.__dict__["text"] == f"x{MASK}"
    assert rec.__dict__["data"] == f"{{'v': '{MASK}'}}"
    assert rec.__dict__["n"] == 3
    untouched = record("agent said %s", SECRET)
    MaskingFilter().filter(untouched)  # no live session: nothing is known to be secret
    assert untouched.getMessage() == f"agent said {SECRET}"


def test_filter_never_raises_and_withholds_what_it_cannot_render() -> None:
    rec = record("%d", "not a number")
    with masking.registered([SECRET]):
        assert MaskingFilter().filter(rec)
    assert rec.getMessage() == "a log record could not be masked and was withheld"


def test_package_loggers_carry_the_filter_and_the_root_logger_does_not(caplog: pytest.LogCaptureFixture) -> None:
    late = logging.getLogger("remote_acp.test.created_without_the_helper")
    with masking.registered([SECRET]):
        assert any(isinstance(f, MaskingFilter) for f in late.filters)  # attached at register
        assert any(isinstance(f, MaskingFilter) for f in get_logger("remote_acp.test.helper").filters)
        adapter = ContextLogger(logging.getLogger("remote_acp.test.adapter"), {"host": "h"})
        with caplog.at_level(logging.INFO):
            late.info("late %s", SECRET)
            adapter.info("adapter", extra={"quoted": SECRET})
            logging.getLogger("someone.else").info("theirs %s", SECRET)
    assert not any(isinstance(f, MaskingFilter) for f in logging.getLogger().filters)
    assert not any(isinstance(f, MaskingFilter) for h in logging.getLogger().handlers for f in h.filters)
    by_name = {r.name: r for r in caplog.records}
    assert by_name["remote_acp.test.created_without_the_helper"].getMessage() == f"late {MASK}"
    assert by_name["remote_acp.test.adapter"].__dict__["quoted"] == MASK
    # The embedding application's own records are its business.
    assert by_name["someone.else"].getMessage() == f"theirs {SECRET}"


def test_text_formatter_keeps_one_record_on_one_line() -> None:
    rec = record("unrecognized %s", "x\nerror: forged line\x1b[2J", field="a\rb\x1b]0;t\x07")
    line = TextFormatter().format(rec)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\x07" not in line
    assert line == "warning: unrecognized x\\nerror: forged line\\x1b[2J (field=a\\rb\\x1b]0;t\\x07)"


def test_json_formatter_escapes_every_control_and_non_ascii_character() -> None:
    text = "x\nerror: forged\r\x1b[2J\x9b\u2028é"
    line = JsonFormatter().format(record("said %s", text, field=text))
    assert line.isascii()
    assert not any(ord(c) < 0x20 for c in line)
    out = json.loads(line)
    assert out["message"] == f"said {text}" and out["field"] == text


def test_cli_handler_masks_records_of_any_logger() -> None:
    from remote_acp.cli.logging_setup import configure_logging

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure_logging("info", "text")
        (handler,) = root.handlers
        rec = record("quoted %s", SECRET)
        with masking.registered([SECRET]):
            assert handler.filter(rec)
        assert rec.getMessage() == f"quoted {MASK}"
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


# -- the rate limit -------------------------------------------------------------------------------


def test_token_bucket_allows_a_burst_then_its_rate_and_counts_the_rest() -> None:
    bucket = TokenBucket(burst=3, rate=2.0)
    assert [bucket.take(10.0) for _ in range(5)] == [True, True, True, False, False]
    assert bucket.take(10.4) is False  # 0.8 of a token
    assert bucket.take(10.5) is True  # one token after 0.5 s at 2 a second
    assert bucket.take(100.0) and bucket.take(100.0) and bucket.take(100.0)  # refills to the burst only
    assert bucket.take(100.0) is False
    assert bucket.take_dropped() == 4
    assert bucket.take_dropped() == 0


def test_token_bucket_ignores_a_clock_that_goes_backwards() -> None:
    bucket = TokenBucket(burst=1, rate=1.0)
    assert bucket.take(10.0)
    assert not bucket.take(5.0)
    assert not bucket.take(10.5)
    assert bucket.take(11.0)


def test_malformed_events_past_the_burst_are_dropped_and_reported_before_the_next() -> None:
    clock = Clock()
    n = normalizer(clock=clock)
    events: list[Event] = []
    for i in range(MALFORMED_BURST + 30):
        n.malformed(events.append, "broken", f"line {i}")
    assert len(events) == MALFORMED_BURST
    clock.now += 1 / MALFORMED_RATE
    n.malformed(events.append, "broken", "after a pause")
    assert [(e.message, e.detail) for e in events[MALFORMED_BURST:] if isinstance(e, Malformed)] == [
        ("30 more malformed inputs were dropped", ""),
        ("broken", "after a pause"),
    ]
    n.flush_dropped(events.append)
    assert len(events) == MALFORMED_BURST + 2  # nothing dropped since


def test_one_dropped_input_is_reported_in_the_singular() -> None:
    n = normalizer()
    events: list[Event] = []
    for _ in range(MALFORMED_BURST + 1):
        n.malformed(events.append, "broken")
    n.flush_dropped(events.append)
    assert isinstance(events[-1], Malformed) and events[-1].message == "1 more malformed input was dropped"


def test_flush_dropped_reports_a_flood_that_stopped() -> None:
    n = normalizer()
    events: list[Event] = []
    for _ in range(MALFORMED_BURST + 7):
        n.on_update(update(5), events.append)
    n.flush_dropped(events.append)
    assert isinstance(events[-1], Malformed)
    assert events[-1].message == "7 more malformed inputs were dropped"
    assert len(events) == MALFORMED_BURST + 1


def test_a_dropped_malformed_input_costs_no_masking() -> None:
    n = normalizer(SECRET)
    events: list[Event] = []
    for _ in range(MALFORMED_BURST):
        n.malformed(events.append, "broken")
    huge = SECRET * 1_000_000  # 24 MB: quoting it per event would be slow; dropped ones are free
    for _ in range(10_000):
        n.malformed(events.append, "broken", huge)
    assert len(events) == MALFORMED_BURST


# -- the normalizer masks what the agent wrote ----------------------------------------------------


def run(n: Normalizer, *updates: Any) -> list[Event]:
    events: list[Event] = []
    for params in updates:
        n.on_update(params, events.append)
    n.flush(events.append)
    return events


def test_a_secret_streamed_a_few_characters_per_chunk_is_masked() -> None:
    text = f"the key is {SECRET}, keep it safe"
    events = run(normalizer(SECRET), *(chunk(text[i : i + 3]) for i in range(0, len(text), 3)))
    deltas = "".join(e.delta or "" for e in events if isinstance(e, Notification))
    assert deltas == f"the key is {MASK}, keep it safe"
    whole = [e.message for e in events if isinstance(e, Notification) and e.message]
    assert whole == [f"the key is {MASK}, keep it safe"]


def test_the_held_end_of_a_message_is_sent_when_it_ends() -> None:
    events = run(normalizer(SECRET), chunk("ends with sk-li"))
    assert [(e.message, e.delta) for e in events if isinstance(e, Notification)] == [
        ("", "ends with "),
        ("", "sk-li"),
        ("ends with sk-li", None),
    ]


def test_secrets_can_be_set_after_construction() -> None:
    n = normalizer()
    n.secrets = (SECRET,)
    assert n.secrets == (SECRET,)
    events = run(n, chunk(f"a {SECRET} b"))
    assert [e.to_json().get("delta") for e in events] == [f"a {MASK} b", None]
    assert all(SECRET not in json.dumps(e.to_json()) for e in events)


def test_tool_title_is_masked_before_it_is_capped() -> None:
    # Capped first, the title would end "sk-live-0…": a prefix of the secret.
    title = "x" * (MESSAGE_CAP - 10) + SECRET
    events = run(
        normalizer(SECRET),
        update("tool_call", toolCallId="c1", title=title, kind="read", status="pending"),
        update("tool_call_update", toolCallId="c1", status="completed"),
    )
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.message == "x" * (MESSAGE_CAP - 10) + MASK


def test_unknown_update_kind_is_masked_escaped_and_bounded() -> None:
    events = run(normalizer(SECRET), update(f"{SECRET}\nerror: forged\x1b[2J" + "v" * 1000))
    (event,) = events
    assert isinstance(event, Malformed)
    assert event.detail.startswith(f"{MASK}\\nerror: forged\\x1b[2J")
    assert len(event.detail) <= DETAIL_CAP


def test_malformed_detail_cut_upstream_drops_a_trailing_start_of_a_secret() -> None:
    events: list[Event] = []
    normalizer(SECRET).malformed(
        events.append, "bad line", "the line is not valid JSON: " + SECRET[:9], detail_cut=True
    )
    (event,) = events
    assert isinstance(event, Malformed)
    assert event.detail == "the line is not valid JSON: …"


def test_over_long_tool_call_id_is_refused_and_not_tracked() -> None:
    n = normalizer()
    long_id = "t" * (TOOL_CALL_ID_BOUND + 1)
    events = run(
        n,
        update("tool_call", toolCallId=long_id, title="Read", kind="read", status="pending"),
        update("tool_call_update", toolCallId=long_id, status="completed"),
        update("tool_call", toolCallId="t" * TOOL_CALL_ID_BOUND, title="Read", kind="read", status="completed"),
    )
    assert [type(e).__name__ for e in events] == ["Malformed", "ToolResult"]
    assert isinstance(events[0], Malformed)
    assert events[0].message == (
        f"received a tool call whose id is {TOOL_CALL_ID_BOUND + 1} characters long, over the bound of "
        f"{TOOL_CALL_ID_BOUND}"
    )
    assert len(events[0].detail) <= DETAIL_CAP


def test_open_tool_calls_stay_bounded_with_capped_titles() -> None:
    n = normalizer()
    sink: list[Event] = []
    for i in range(3_000):
        n.on_update(update("tool_call", toolCallId=f"c{i}", title="t" * 10_000, status="pending"), sink.append)
    tools = n._tools
    assert len(tools) == 1_000
    assert all(len(call.title) <= MESSAGE_CAP for call in tools.values())


# -- stop reasons and session ids -----------------------------------------------------------------


def test_unrecognized_stop_reason_is_masked_escaped_and_bounded() -> None:
    m = Masker([SECRET])
    d = disposition_for_stop_reason(f"{SECRET}\nerror: forged" + "r" * 2000, cancel_requested=False, masker=m)
    assert d.message.startswith(f'agent reported an unrecognized stop reason: "{MASK}\\nerror: forged')
    assert len(d.message) <= MESSAGE_CAP
    shown = shown_stop_reason(f"{SECRET}\x1b" + "r" * 2000, m)
    assert shown is not None and shown.startswith(f"{MASK}\\x1b") and len(shown) <= 100
    assert shown_stop_reason("end_turn", m) == "end_turn"
    assert shown_stop_reason(["end_turn"], m) is None


def test_a_structured_stop_reason_is_quoted_by_a_bounded_repr() -> None:
    deep: Any = SECRET
    for _ in range(10_000):
        deep = [deep]
    d = disposition_for_stop_reason(deep, cancel_requested=False, masker=Masker([SECRET]))
    assert d.message.startswith('agent reported an unrecognized stop reason: "[[[')
    huge = {"k": SECRET * 100_000}
    d = disposition_for_stop_reason(huge, cancel_requested=False, masker=Masker([SECRET]))
    assert "sk-" not in d.message and len(d.message) <= MESSAGE_CAP


def test_session_id_at_the_bound_is_accepted() -> None:
    assert parse_new_session({"sessionId": "s" * SESSION_ID_BOUND}) == "s" * SESSION_ID_BOUND


@pytest.mark.parametrize(
    ("session_id", "why"),
    [
        ("s" * (SESSION_ID_BOUND + 1), f"is {SESSION_ID_BOUND + 1} characters long, over the bound of"),
        ("s" * 1_048_576, "is 1048576 characters long, over the bound of 256"),
        ("sess\n2026-01-01 error: forged", "holds a control character"),
        ("sess\x1b[2J", "holds a control character"),
    ],
)
def test_session_id_over_the_bound_or_with_control_characters_is_refused(session_id: str, why: str) -> None:
    with pytest.raises(WireError, match=why):
        parse_new_session({"sessionId": session_id})
