"""The turn machine without processes: every rule of a turn, fed events, answers and the time."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from remote_acp.errors import Cause, ErrorFacts, ErrorKind
from remote_acp.events import (
    Event,
    Malformed,
    Notification,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnInputRequired,
    TurnTimedOut,
)
from remote_acp.masking import Masker
from remote_acp.protocol.jsonrpc import RpcErrorBody
from remote_acp.session.turn import (
    MAX_BUFFERED_BYTES,
    MAX_BUFFERED_EVENTS,
    Ending,
    TurnBounds,
    TurnMachine,
)

BOUNDS = TurnBounds(turn_s=100.0, stall_s=10.0, read_s=5.0, turn_ms=100_000, stall_ms=10_000)
NO_SECRETS = Masker(())


def machine(bounds: TurnBounds = BOUNDS, *, sent: bool = True) -> TurnMachine:
    m = TurnMachine("hello", bounds, now=0.0, session_id="s1", pid=7)
    if sent:
        m.on_prompt_sent()
    return m


def chunk(text: str = "x") -> Event:
    return Notification(timestamp=datetime.now(UTC), pid=7, session_id="s1", message="", delta=text)


def terminal(m: TurnMachine) -> Event:
    assert m.result is not None
    return m.events[-1]


def test_the_answer_decides_a_turn_nobody_interfered_with() -> None:
    m = machine()
    m.on_answer({"stopReason": "end_turn"}, None, NO_SECRETS)
    assert m.result is not None and m.result.ok and m.result.outcome == "turn_completed"
    assert m.result.stop_reason == "end_turn"
    assert isinstance(terminal(m), TurnCompleted)
    assert m.next_deadline() == math.inf


def test_an_answer_after_the_result_changes_nothing() -> None:
    m = machine()
    m.on_answer({"stopReason": "refusal"}, None, NO_SECRETS)
    m.on_answer({"stopReason": "end_turn"}, None, NO_SECRETS)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_REFUSED
    assert sum(isinstance(e, TurnFailed) for e in m.events) == 1


def test_an_error_answer_is_a_response_error_quoted_masked_and_bounded() -> None:
    m = machine()
    m.on_answer(None, RpcErrorBody(-32603, "boom sk-secret-1234 " + "y" * 2000), Masker(("sk-secret-1234",)))
    assert m.result is not None and m.result.error_kind is ErrorKind.RESPONSE_ERROR
    assert m.result.message.startswith("session/prompt error -32603: boom *** yyy")
    assert "sk-secret" not in m.result.message and len(m.result.message) < 600


def test_an_answer_without_a_stop_reason_is_an_unknown_outcome() -> None:
    m = machine()
    m.on_answer({"nothing": 1}, None, NO_SECRETS)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN


def test_an_unrecognized_stop_reason_is_masked_where_it_is_quoted() -> None:
    m = machine()
    m.on_answer({"stopReason": "leaked sk-secret-1234"}, None, Masker(("sk-secret-1234",)))
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN
    assert "sk-secret" not in m.result.message and "sk-secret" not in (m.result.stop_reason or "")


def test_the_turn_bound_cancels_once_then_waits_read_timeout_for_the_answer() -> None:
    m = machine()
    assert m.next_deadline() == 10.0  # the stall bound comes first
    m.note_batch(100, now=9.0)  # an event-less batch is not activity
    m.events.append(chunk())
    m.note_batch(100, now=9.5)
    assert m.next_deadline() == 19.5
    m.tick(19.4)
    assert m.ending is None and not m.take_cancel(19.4)
    m.events.clear()
    for now in range(19, 100, 9):  # keep it busy so the stall bound never fires
        m.events.append(chunk())
        m.note_batch(10, now=float(now))
    m.tick(100.0)
    assert m.ending == Ending.timed_out(100_000)
    assert m.take_cancel(100.0) and not m.take_cancel(100.1)  # session/cancel is sent once
    assert m.next_deadline() == 105.0
    m.tick(104.9)
    assert m.result is None
    m.tick(105.0)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_TIMEOUT
    assert isinstance(terminal(m), TurnTimedOut)
    assert m.result.message == "the turn ran past turn_timeout_ms (100000 ms)"


def test_the_runtimes_answer_after_an_induced_ending_keeps_the_ending_and_shows_its_stop_reason() -> None:
    m = machine()
    m.induce(Ending.cancelled())
    assert m.take_cancel(1.0)
    m.on_answer({"stopReason": "cancelled"}, None, NO_SECRETS)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_CANCELLED
    assert m.result.stop_reason == "cancelled" and isinstance(terminal(m), TurnCancelled)


def test_the_first_induced_ending_wins() -> None:
    m = machine()
    m.induce(Ending.input_required("a permission with no refusing option"))
    m.induce(Ending.cancelled())
    assert m.take_cancel(1.0)
    m.tick(6.0)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_INPUT_REQUIRED
    assert isinstance(terminal(m), TurnInputRequired)


def test_an_ending_decided_before_the_prompt_went_out_ends_at_once_without_a_cancel() -> None:
    m = machine(sent=False)
    m.induce(Ending.input_required("x"))
    assert not m.take_cancel(0.0)
    assert m.next_deadline() == -math.inf
    m.tick(0.0)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_INPUT_REQUIRED


def test_a_cancel_decided_while_the_prompt_is_on_its_way_is_sent_once_it_went_out() -> None:
    m = machine(sent=False)
    m.induce(Ending.cancelled())
    m.on_prompt_sent()
    assert m.take_cancel(1.0)


def test_the_stall_bound_fires_after_silence() -> None:
    m = machine()
    m.tick(10.0)
    assert m.ending == Ending.stalled(10_000)


def test_stall_disabled() -> None:
    m = machine(TurnBounds(turn_s=100.0, stall_s=0.0, read_s=5.0, turn_ms=100_000, stall_ms=0))
    assert m.next_deadline() == 100.0
    m.tick(99.0)
    assert m.ending is None


def test_a_full_buffer_stops_reading_and_is_not_a_stall() -> None:
    m = machine()
    m.events.extend(chunk() for _ in range(MAX_BUFFERED_EVENTS))
    m.note_batch(1000, now=1.0)
    assert m.full
    assert m.next_deadline() == 100.0  # no stall deadline while the caller is behind
    m.tick(50.0)
    assert m.ending is None
    taken = m.take_all()
    assert len(taken) == MAX_BUFFERED_EVENTS and not m.events and not m.full
    m.resumed(50.0)
    assert m.next_deadline() == 60.0  # the stall bound counts from the resumption


def test_buffered_bytes_count_too() -> None:
    m = machine()
    m.events.append(chunk())
    m.note_batch(MAX_BUFFERED_BYTES, now=1.0)
    assert m.full
    m.take_all()
    assert not m.full and m.buffered_bytes == 0


def test_once_ending_what_no_longer_fits_is_dropped_and_counted() -> None:
    m = machine()
    m.induce(Ending.timed_out(1))
    assert not m.full  # the session must read on to find the answer
    m.events.extend(chunk() for _ in range(MAX_BUFFERED_EVENTS + 250))
    m.note_batch(10, now=1.0)
    assert len(m.events) == MAX_BUFFERED_EVENTS and m.dropped == 250
    m.on_answer({"stopReason": "cancelled"}, None, NO_SECRETS)
    *_, notice, last = m.events
    assert isinstance(notice, Malformed)
    assert notice.message == "250 events arrived after the turn's ending was decided and were dropped"
    assert isinstance(last, TurnTimedOut)


def test_a_failed_write_ends_the_turn_after_read_timeout_unless_an_answer_comes() -> None:
    m = machine()
    m.on_write_failed(3.0)
    m.on_write_failed(4.0)  # the first failure counts
    assert m.next_deadline() == 8.0
    m.tick(8.0)
    assert m.result is not None and m.result.error_kind is ErrorKind.PORT_EXIT
    assert m.result.message == "a write to the agent failed and no answer followed within read_timeout_ms"


def test_a_lost_connection_is_finished_with_the_exit_report() -> None:
    m = machine()
    m.on_lost()
    assert m.lost and m.result is None
    m.finish_lost("the agent's connection ended before a response arrived", "exit status 3; stderr: boom")
    assert m.result is not None and m.result.error is not None
    assert m.result.error.kind is ErrorKind.PORT_EXIT and m.result.error.detail == "exit status 3; stderr: boom"


@pytest.mark.parametrize("induced", [None, Ending.input_required("x")])
def test_stop_ends_now_with_the_ending_already_decided(induced: Ending | None) -> None:
    m = machine()
    if induced is not None:
        m.induce(induced)
    m.stop(Ending.cancelled("the session was closed while the turn was running"))
    assert m.result is not None
    expected = induced.kind if induced is not None else ErrorKind.TURN_CANCELLED
    assert m.result.error_kind is expected


def test_an_unreadable_answer_is_an_unknown_outcome_settled_like_a_cancel() -> None:
    m = machine()
    m.on_unreadable_answer("a line from the agent exceeded the connection's line bound")
    assert m.take_cancel(1.0)
    m.tick(6.0)
    assert m.result is not None and m.result.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN
    assert m.result.message == "a line from the agent exceeded the connection's line bound"


# -- causes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "cause", "retryable"),
    [
        ({"stopReason": "refusal"}, Cause.REFUSED, False),
        ({"stopReason": "max_tokens"}, Cause.TOKEN_LIMIT, False),
        ({"stopReason": "max_turn_requests"}, Cause.REQUEST_LIMIT, True),
        ({"stopReason": "cancelled"}, Cause.AGENT_REPORTED_FAILURE, True),  # a cancel nobody asked for
        ({"stopReason": "mystery"}, Cause.OUTCOME_UNKNOWN, False),
        ({}, Cause.OUTCOME_UNKNOWN, False),
    ],
)
def test_every_answered_ending_carries_its_cause(answer: dict[str, str], cause: Cause, retryable: bool) -> None:
    m = machine()
    m.on_answer(answer, None, NO_SECRETS)
    assert m.result is not None and m.result.error is not None
    assert (m.result.cause, m.result.error.retryable) == (cause, retryable)
    assert m.result.to_json()["cause"] == cause.value


@pytest.mark.parametrize(
    ("ending", "kind", "cause", "bound_ms"),
    [
        (Ending.cancelled(), ErrorKind.TURN_CANCELLED, Cause.CANCELLED, None),
        (Ending.stalled(10_000), ErrorKind.TURN_CANCELLED, Cause.STALLED, 10_000),
        (Ending.timed_out(100_000), ErrorKind.TURN_TIMEOUT, Cause.TURN_DEADLINE, 100_000),
        (Ending.input_required("a login"), ErrorKind.TURN_INPUT_REQUIRED, Cause.INPUT_REQUIRED, None),
        (Ending.outcome_unknown("why"), ErrorKind.TURN_OUTCOME_UNKNOWN, Cause.OUTCOME_UNKNOWN, None),
        (Ending.port_exit("why"), ErrorKind.PORT_EXIT, Cause.AGENT_LOST, None),
    ],
)
def test_every_induced_ending_carries_its_cause(
    ending: Ending, kind: ErrorKind, cause: Cause, bound_ms: int | None
) -> None:
    m = machine()
    m.induce(ending)
    m.on_answer({"stopReason": "cancelled"}, None, NO_SECRETS)  # the runtime's answer to our cancel
    assert m.result is not None and m.result.error is not None
    assert (m.result.error.kind, m.result.error.cause, m.result.error.facts.bound_ms) == (kind, cause, bound_ms)


def test_a_stall_says_it_stalled() -> None:
    m = machine()
    m.tick(10.0)
    assert m.take_cancel(10.0)
    m.on_answer({"stopReason": "cancelled"}, None, NO_SECRETS)
    assert m.result is not None and m.result.cause is Cause.STALLED
    assert m.result.message == "the turn stalled: the agent sent nothing for stall_timeout_ms (10000 ms)"
    last = terminal(m)
    assert isinstance(last, TurnCancelled) and last.message == m.result.message


@pytest.mark.parametrize(
    ("code", "kind", "cause"),
    [
        (-32000, ErrorKind.CREDENTIAL_UNVERIFIED, Cause.CREDENTIAL_REFUSED),
        (-32603, ErrorKind.RESPONSE_ERROR, Cause.AGENT_ERROR),
    ],
)
def test_an_error_answer_reads_as_at_any_call(code: int, kind: ErrorKind, cause: Cause) -> None:
    m = machine()
    m.on_answer(None, RpcErrorBody(code, "no", {"details": "exited"}), NO_SECRETS, hint="run `x login`")
    assert m.result is not None and m.result.error is not None
    error = m.result.error
    assert (error.kind, error.cause, error.facts.rpc_code, error.facts.rpc_data) == (
        kind,
        cause,
        code,
        '{"details":"exited"}',
    )
    assert ("run `x login`" in error.message) is (code == -32000)


def test_a_lost_connection_carries_the_cause_and_facts_it_is_given() -> None:
    m = machine()
    m.on_lost()
    m.finish_lost("ended", "killed by signal SIGKILL", cause=Cause.AGENT_KILLED, facts=ErrorFacts(signal=9))
    assert m.result is not None and m.result.error is not None
    assert (m.result.cause, m.result.error.facts.signal, m.result.error.retryable) == (Cause.AGENT_KILLED, 9, True)
