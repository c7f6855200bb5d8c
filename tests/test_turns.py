"""Turns against real agent subprocesses: streaming, dispositions, cancellation and bounds."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import (
    ErrorKind,
    Event,
    Malformed,
    Notification,
    OtherMessage,
    RemoteAcpError,
    SessionStarted,
    ToolResult,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnNotStarted,
    TurnResult,
    TurnTimedOut,
    open_session,
)
from remote_acp.errors import Cause
from tests.support.agents import fast_options, give_up_on_turn, scripted, wait_until

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

# The scriptable agent advertises no way to continue a session by default, and nothing measures
# its tokens: the first turn of every session says so.
GAPS = "this session started with a declared capability gap in: token counts, session continuation"


def failure(result: TurnResult) -> RemoteAcpError:
    assert result.error is not None, f"the turn completed: {result}"
    return result.error


async def one_turn(workspace: str, prompt: str, *args: str, **overrides: object) -> tuple[list[Event], TurnResult]:
    events: list[Event] = []
    async with open_session(workspace, fast_options(scripted(*args), **overrides)) as s:
        result = await s.run_turn(prompt, events.append)
    return events, result


@pytest.mark.both_backends
async def test_streaming_turn_event_sequence(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(scripted())) as s:
        result = await s.run_turn("@chunks=3 @thought @plan @tool hello world", events.append)
        assert s.last_message == "hello world"
    kinds = [(type(e).__name__, getattr(e, "message", None), getattr(e, "delta", None)) for e in events]
    assert kinds == [
        ("SessionStarted", None, None),
        ("Notification", GAPS, None),
        ("OtherMessage", "reasoning block", None),
        ("OtherMessage", "plan update", None),
        ("ToolResult", "Read README.md", None),
        ("Notification", "", "hell"),
        ("Notification", "", "o wo"),
        ("Notification", "", "rld"),
        ("Notification", "hello world", None),
        ("TurnCompleted", "the agent completed the turn", None),
    ]
    assert all(e.session_id == "sess-1" and e.pid == s.pid for e in events)
    tool = events[4]
    assert isinstance(tool, ToolResult) and tool.tool_name == "read" and not tool.error
    assert result.ok and result.outcome == "turn_completed" and result.stop_reason == "end_turn"


@pytest.mark.both_backends
async def test_turns_share_one_process_and_session(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record)))) as s:
        pid = s.pid
        for word in ("one", "two", "three"):
            result = await s.run_turn(word)
            assert result.ok and result.last_message == word
            assert s.pid == pid
    prompts = [json.loads(line) for line in record.read_text().splitlines()]
    prompts = [m for m in prompts if m.get("method") == "session/prompt"]
    assert [p["params"]["prompt"] for p in prompts] == [[{"type": "text", "text": w}] for w in ("one", "two", "three")]
    assert {p["params"]["sessionId"] for p in prompts} == {"sess-1"}


@pytest.mark.parametrize(
    ("stop", "kind", "message", "retryable"),
    [
        ("refusal", ErrorKind.TURN_REFUSED, "the agent refused to answer the prompt", False),
        (
            "max_tokens",
            ErrorKind.TURN_TOKEN_LIMIT,
            "the agent stopped at its token limit for the turn",
            False,
        ),
        (
            "max_turn_requests",
            ErrorKind.TURN_REQUEST_LIMIT,
            "the agent stopped at its model-request limit for the turn; a new turn starts a new budget",
            True,
        ),
        (
            "cancelled",
            ErrorKind.TURN_FAILED,
            "agent reported a cancelled stop reason without a cancellation on either side",
            True,
        ),
        (
            "exploded",
            ErrorKind.TURN_OUTCOME_UNKNOWN,
            'agent reported an unrecognized stop reason: "exploded"',
            False,
        ),
    ],
)
async def test_stop_reasons(workspace: str, stop: str, kind: ErrorKind, message: str, retryable: bool) -> None:
    events, result = await one_turn(workspace, f"@stop={stop} hi")
    assert result.error is not None
    err: RemoteAcpError = result.error
    assert (err.kind, str(err), err.retryable) == (kind, message, retryable)
    last = events[-1]
    assert isinstance(last, TurnFailed) and last.error_kind == kind.value and last.stop_reason == stop


async def test_prompt_rpc_error_is_response_error(workspace: str) -> None:
    _, result = await one_turn(workspace, "@error=-32603")
    err = failure(result)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.RESPONSE_ERROR, Cause.AGENT_ERROR, True)
    assert str(result.error) == "session/prompt error -32603: scripted failure"
    assert (err.facts.rpc_code, err.facts.rpc_data) == (-32603, None)


async def test_crash_mid_turn_is_port_exit(workspace: str) -> None:
    events, result = await one_turn(workspace, "@crash=9 partial")
    err = failure(result)
    assert err.kind is ErrorKind.PORT_EXIT
    assert err.message == "the agent's connection ended before a response arrived"
    assert err.detail == "exit status 9; stderr: crashing mid-turn"
    # It ran, then ended mid-turn: a fresh session may not meet what ended it (an agent that
    # exits before it answers at all is agent_exited, and will again).
    assert (err.cause, err.retryable, err.facts.exit_status) == (Cause.AGENT_LOST, True, 9)
    assert result.to_json()["cause"] == "agent_lost"
    # the partial reply is still reported before the terminal event
    assert [type(e) for e in events[-2:]] == [Notification, TurnFailed]
    assert isinstance(events[-2], Notification) and events[-2].message == "partial"


async def test_turn_after_connection_loss_never_starts(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted())) as s:
        first = await s.run_turn("@crash=1")
        assert first.error is not None and first.error.kind is ErrorKind.PORT_EXIT
        events: list[Event] = []
        again = await s.run_turn("again", events.append)
    assert again.outcome == "turn_not_started"
    err = failure(again)
    assert err.kind is ErrorKind.PORT_EXIT and err.cause is Cause.AGENT_LOST and err.retryable
    assert str(err) == "the agent connection ended before this turn could start"
    (only,) = events
    assert isinstance(only, TurnNotStarted) and only.message == str(err) and only.error_kind == "port_exit"


async def test_second_turn_in_flight_never_reaches_the_agent(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record)))) as s:
        async with s.turn("@sleep=0.5 first") as first:
            async with s.turn("second") as second:
                events = [e async for e in second]
            assert [type(e) for e in events] == [TurnNotStarted]
            assert second.result is not None and second.result.outcome == "turn_not_started"
            err = failure(second.result)
            assert err.kind is ErrorKind.RESPONSE_ERROR and not err.retryable  # the caller's own misuse
            assert err.backoff_ms(1) is None
            assert str(err) == "a turn is already in flight for this session"
            async for _ in first:
                pass
        assert first.result is not None and first.result.ok
    prompts = [m for m in map(json.loads, record.read_text().splitlines()) if m.get("method") == "session/prompt"]
    assert len(prompts) == 1


async def test_garbage_line_is_malformed_and_turn_goes_on(workspace: str) -> None:
    events, result = await one_turn(workspace, "@garbage still here")
    malformed = [e for e in events if isinstance(e, Malformed)]
    assert len(malformed) == 1
    assert malformed[0].message == "received a line that could not be parsed as JSON-RPC"
    assert "this is not json" in malformed[0].detail
    assert result.ok and result.last_message == "still here"


async def test_over_long_line_ends_turn_unknown_and_framing_resyncs(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted(), max_line_bytes=64 * 1024)) as s:
        first = await s.run_turn("@long-line=300000 @sleep=0.2 after")
        assert first.error is not None
        assert first.error.kind is ErrorKind.TURN_OUTCOME_UNKNOWN
        assert str(first.error) == "a line from the agent exceeded the connection's line bound"
        assert first.stop_reason in ("end_turn", "cancelled")  # the runtime's own answer settled it
        second = await s.run_turn("fine")
    assert second.ok and second.last_message == "fine"


async def test_unknown_notification_and_update_kinds(workspace: str) -> None:
    events, result = await one_turn(workspace, "@unknown-notification @unknown-update @foreign ok")
    malformed = [e for e in events if isinstance(e, Malformed)]
    assert [m.message for m in malformed] == ["received a session update of an unrecognized kind"]
    assert not any(isinstance(e, Notification) and e.delta == "foreign text" for e in events)
    assert result.ok


async def test_agent_requests_use_id_zero_and_unknown_ones_get_method_not_found(workspace: str) -> None:
    events, result = await one_turn(workspace, "@vendor-request @permission done")
    texts = [e.message for e in events if isinstance(e, Notification) and e.delta is None]
    assert "vendor request answered: error -32601" in texts
    assert "permission outcome: selected reject" in texts
    assert "refused a permission request because this run is unattended and no one can approve it" in texts
    assert result.ok


async def test_cancel_sends_one_session_cancel_and_waits_for_answer(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record)))) as s:
        async with s.turn("@sleep=30") as turn:
            with anyio.move_on_after(0.3):
                async for _ in turn:
                    pass
            turn.cancel()
            events = [e async for e in turn]
        assert turn.result is not None
        assert turn.result.error is not None and turn.result.error.kind is ErrorKind.TURN_CANCELLED
        assert isinstance(events[-1], TurnCancelled)
        assert turn.result.stop_reason == "cancelled"  # the runtime's own answer decided the end
        follow_up = await s.run_turn("next")
        assert follow_up.ok
    cancels = [m for m in map(json.loads, record.read_text().splitlines()) if m.get("method") == "session/cancel"]
    assert cancels == [{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess-1"}}]


async def test_cancel_of_a_runtime_that_ignores_it_is_bounded(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted(), read_timeout_ms=400)) as s:
        async with s.turn("@sleep=30 @ignore-cancel") as turn:
            turn.cancel()
            with anyio.fail_after(3):
                events = [e async for e in turn]
    assert isinstance(events[-1], TurnCancelled)
    assert turn.result is not None and turn.result.stop_reason is None


async def test_caller_task_cancelled_mid_turn_still_settles_the_turn(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted())) as s:
        with anyio.move_on_after(0.3):
            await s.run_turn("@sleep=30")
        # the session is not wedged "in flight"
        result = await s.run_turn("after")
    assert result.ok


async def test_turn_timeout(workspace: str) -> None:
    events, result = await one_turn(workspace, "@sleep=30", turn_timeout_ms=300)
    err = failure(result)
    assert err.kind is ErrorKind.TURN_TIMEOUT and err.retryable
    assert (err.cause, err.facts.bound_ms) == (Cause.TURN_DEADLINE, 300)
    assert str(err) == "the turn ran past turn_timeout_ms (300 ms)"
    assert isinstance(events[-1], TurnTimedOut)


@pytest.mark.both_backends
async def test_stall_timeout_names_the_bound(workspace: str) -> None:
    events, result = await one_turn(workspace, "@sleep=30", stall_timeout_ms=300)
    err = failure(result)
    # The seeds' kind, but nobody cancelled it: it stalled, and a retry may do.
    assert err.kind is ErrorKind.TURN_CANCELLED
    assert (err.cause, err.retryable, err.facts.bound_ms) == (Cause.STALLED, True, 300)
    assert str(err) == "the turn stalled: the agent sent nothing for stall_timeout_ms (300 ms)"
    assert result.stop_reason == "cancelled"  # the agent's answer to our cancel; the cause says why we sent it
    assert isinstance(events[-1], TurnCancelled) and events[-1].message == str(err)
    assert result.to_json()["cause"] == "stalled" and result.to_json()["retryable"] is True


async def test_the_stall_bound_restarts_with_each_turn(workspace: str) -> None:
    # 0.25 s without events in each turn, stall bound 1 s, four turns ~1 s in all: never stalls.
    async with open_session(workspace, fast_options(scripted(), stall_timeout_ms=1000)) as s:
        for _ in range(4):
            result = await s.run_turn("@sleep=0.25 tick")
            assert result.ok


async def test_events_between_turns_are_delivered_after_next_session_started(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted(), read_timeout_ms=300)) as s:
        # The agent keeps talking after we stopped waiting for the first turn.
        await give_up_on_turn(s, "@sleep=0.6 @ignore-cancel late words")
        await wait_until(lambda: any(getattr(e, "delta", None) == "late words" for e in s._inbox.between.events))
        events: list[Event] = []
        await s.run_turn("fresh", events.append)
    assert isinstance(events[0], SessionStarted)
    deltas = [e.delta for e in events if isinstance(e, Notification) and e.delta]
    assert deltas == ["late words", "fresh"]
    assert isinstance(events[-1], TurnCompleted)


async def test_other_message_and_tool_failure(workspace: str) -> None:
    events, _ = await one_turn(workspace, "@tool-fail ok")
    tool = [e for e in events if isinstance(e, ToolResult)]
    assert len(tool) == 1 and tool[0].error and tool[0].message == "Read failed"
    assert not [e for e in events if isinstance(e, OtherMessage)]


async def test_a_turn_the_caller_abandoned_is_taken_back_or_settled(workspace: str, tmp_path: Path) -> None:
    # The caller gives up at once. Either the prompt was still queued and is taken back, or it
    # already reached the runtime and is cancelled and settled: never does its output reach the
    # next turn, and the session is never left "in flight".
    record = tmp_path / "rec.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record)))) as s:
        with anyio.move_on_after(0):
            await s.run_turn("@chunks=3 abandoned words")
        events: list[Event] = []
        assert (await s.run_turn("second", events.append)).ok
    assert [e.delta for e in events if isinstance(e, Notification) and e.delta] == ["second"]
    sent = [m for m in map(json.loads, record.read_text().splitlines()) if m.get("method")]
    prompts = [m["params"]["prompt"][0]["text"] for m in sent if m["method"] == "session/prompt"]
    if prompts[0] != "second":
        assert [m["method"] for m in sent][-3:] == ["session/prompt", "session/cancel", "session/prompt"]


async def test_an_agent_that_stops_reading_fails_the_turn_within_read_timeout(workspace: str) -> None:
    # The agent sends a permission request whose refusal is bigger than a pipe, then stops
    # reading its stdin: the refusal's write waits, and after read_timeout_ms the turn is a
    # port_exit that says why; later turns never start.
    options = fast_options(scripted(), read_timeout_ms=500, turn_timeout_ms=60_000, stall_timeout_ms=60_000)
    async with open_session(workspace, options) as s:
        with anyio.fail_after(10):
            first = await s.run_turn("@stop-reading")
            err = failure(first)
            assert err.kind is ErrorKind.PORT_EXIT and err.retryable
            assert str(err) == "the agent stopped reading its input: a write waited read_timeout_ms (500 ms)"
            second = await s.run_turn("nor this")
        assert second.outcome == "turn_not_started" and failure(second).kind is ErrorKind.PORT_EXIT


async def test_an_answered_turn_is_not_timed_out_by_a_slow_consumer(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted(), turn_timeout_ms=300, stall_timeout_ms=300)) as s:
        async with s.turn("quick") as turn:
            async for _ in turn:
                await anyio.sleep(0.5)  # the caller is slower than both bounds
        assert turn.result is not None and turn.result.ok, turn.result
        s.cancel()  # a cancel after the answer changes nothing either
        assert (await s.run_turn("next")).ok


async def test_output_after_an_over_long_line_stays_in_its_own_turn(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted(), max_line_bytes=64 * 1024)) as s:
        first = await s.run_turn("@long-line=300000 @chunks=3 trailing words of the first turn")
        assert first.error is not None and first.error.kind is ErrorKind.TURN_OUTCOME_UNKNOWN
        assert first.stop_reason in ("end_turn", "cancelled")  # the runtime's own answer settled it
        events: list[Event] = []
        assert (await s.run_turn("fresh", events.append)).ok
    assert [e.delta for e in events if isinstance(e, Notification) and e.delta] == ["fresh"]


async def test_events_between_turns_are_bounded(workspace: str, caplog: pytest.LogCaptureFixture) -> None:
    async with open_session(workspace, fast_options(scripted(), read_timeout_ms=200)) as s:
        # The agent keeps streaming 12,000 chunks after the turn was settled without it.
        await give_up_on_turn(s, "@sleep=0.3 @ignore-cancel @bulk=12000")
        await wait_until(lambda: s._inbox.between.dropped >= 2000, within=20)
        events: list[Event] = []
        await s.run_turn("fresh", events.append)
    dropped = [e for e in events if isinstance(e, Malformed)]
    assert len(dropped) == 1
    assert re.fullmatch(r"\d+ events that arrived between turns were dropped \(the oldest ones\)", dropped[0].message)
    late = [e for e in events if isinstance(e, Notification) and e.delta == "x"]
    assert len(late) <= 10_000
