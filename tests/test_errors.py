"""The error vocabulary: kinds, retry classes, backoff."""

from __future__ import annotations

import pytest

from hostinv.causes import CAUSES, fix_for
from remote_acp.errors import DEFAULT_CAUSE, RETRYABLE, Cause, ErrorKind, RemoteAcpError, retry_backoff_ms

ALL_KINDS = {
    "agent_not_found",
    "invalid_workspace_cwd",
    "port_exit",
    "response_error",
    "response_timeout",
    "credential_unverified",
    "turn_cancelled",
    "turn_input_required",
    "turn_refused",
    "turn_token_limit",
    "turn_request_limit",
    "turn_outcome_unknown",
    "turn_failed",
    "turn_timeout",
}

RETRYABLE_KINDS = {
    "port_exit",
    "response_error",
    "response_timeout",
    "turn_failed",
    "turn_timeout",
    "turn_request_limit",
}


def test_the_vocabulary_is_exactly_the_design_taxonomy() -> None:
    assert {kind.value for kind in ErrorKind} == ALL_KINDS


def test_kinds_are_strings() -> None:
    assert isinstance(ErrorKind.PORT_EXIT, str)
    assert ErrorKind.PORT_EXIT.value == "port_exit"
    assert f"{ErrorKind.PORT_EXIT}" == "port_exit"
    assert str(ErrorKind.TURN_TIMEOUT) == "turn_timeout"
    assert ErrorKind("agent_not_found") is ErrorKind.AGENT_NOT_FOUND


def test_retry_classes() -> None:
    assert {kind.value for kind in RETRYABLE} == RETRYABLE_KINDS


@pytest.mark.parametrize("kind", sorted(ErrorKind, key=str))
def test_error_retryable_follows_its_kind(kind: ErrorKind) -> None:
    error = RemoteAcpError(kind, "something happened")
    assert error.retryable is (kind.value in RETRYABLE_KINDS)


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (1, 10_000),
        (2, 20_000),
        (3, 40_000),
        (4, 80_000),
        (5, 160_000),
        (6, 300_000),
        (7, 300_000),
        (100, 300_000),
    ],
)
def test_backoff_with_the_default_cap(attempt: int, expected: int) -> None:
    waits = {retry_backoff_ms(attempt) for _ in range(200)}
    assert all(expected * 4 // 5 <= wait <= expected for wait in waits)


def test_backoff_is_jittered_so_failures_together_do_not_retry_together() -> None:
    waits = {retry_backoff_ms(3) for _ in range(200)}
    assert len(waits) > 50
    assert min(waits) < 36_000 and max(waits) > 38_000


@pytest.mark.parametrize(
    ("attempt", "cap", "expected"),
    [
        (1, 5_000, 5_000),
        (1, 10_000, 10_000),
        (2, 15_000, 15_000),
        (3, 1_000_000, 40_000),
        (8, 1_000_000, 1_000_000),
        (7, 1_000_000, 640_000),
        (1, 0, 0),
    ],
)
def test_backoff_with_a_custom_cap(attempt: int, cap: int, expected: int) -> None:
    assert expected * 4 // 5 <= retry_backoff_ms(attempt, cap) <= expected


def test_backoff_for_a_huge_attempt_number_is_the_cap() -> None:
    assert 240_000 <= retry_backoff_ms(10**9) <= 300_000
    assert 98_764 <= retry_backoff_ms(10**18, 123_456) <= 123_456


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_retryability_follows_the_cause_not_the_kind(kind: ErrorKind) -> None:
    assert RemoteAcpError(kind, "x", cause=Cause.AUTH_FAILED).retryable is False
    assert RemoteAcpError(kind, "x", cause=Cause.AUTH_FAILED).backoff_ms(1) is None
    assert RemoteAcpError(kind, "x", cause=Cause.CONNECT_REFUSED).retryable is True
    assert RemoteAcpError(kind, "x", cause=Cause.CONNECT_REFUSED).backoff_ms(1) is not None


@pytest.mark.parametrize("cause", list(Cause))
def test_every_cause_has_one_entry_and_its_fix_fills_without_holes(cause: Cause) -> None:
    info = CAUSES[cause]
    fix = fix_for(cause)
    assert "{" not in fix and "}" not in fix
    if info.fix:
        assert fix
    error = RemoteAcpError(ErrorKind.PORT_EXIT, "x", cause=cause)
    assert error.to_json()["cause"] == cause.value
    assert error.to_json()["retryable"] is info.retryable


def test_a_fix_quotes_each_fact_for_the_shell() -> None:
    fix = fix_for(Cause.HOST_KEY_CHANGED, known_hosts="/tmp/my hosts", key_name="[h]:2222")
    assert "ssh-keygen -f '/tmp/my hosts' -R '[h]:2222'" in fix
    assert fix_for(Cause.WORKSPACE_INVALID, workspace="/w/$x").endswith(": mkdir -p -- '/w/$x'")


def test_every_command_fix_ends_in_its_command() -> None:
    from hostinv.causes import COMMAND_FIXES, fix_command

    for cause in Cause:
        command = fix_command(fix_for(cause))
        assert (command is not None) == (cause in COMMAND_FIXES), cause


def test_every_kind_has_a_default_cause() -> None:
    for kind in ErrorKind:
        assert RemoteAcpError(kind, "x").cause is DEFAULT_CAUSE[kind]


@pytest.mark.parametrize("attempt", [0, -1, -100])
def test_backoff_attempts_count_from_one(attempt: int) -> None:
    with pytest.raises(ValueError, match=f"^retry attempts count from 1, got {attempt}$"):
        retry_backoff_ms(attempt)


def test_error_carries_kind_message_and_detail() -> None:
    error = RemoteAcpError(ErrorKind.PORT_EXIT, "exit status 3", detail="boom | traceback")
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.message == "exit status 3"
    assert error.detail == "boom | traceback"
    assert str(error) == "exit status 3: boom | traceback"
    assert repr(error) == "RemoteAcpError('port_exit', 'agent_lost', 'exit status 3: boom | traceback')"
    assert isinstance(error, Exception)


def test_error_without_detail() -> None:
    error = RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "agent program 'x' was not found")
    assert error.detail == ""
    assert str(error) == "agent program 'x' was not found"
    assert repr(error) == "RemoteAcpError('agent_not_found', 'agent_not_found', \"agent program 'x' was not found\")"


def test_backoff_of_a_retryable_error() -> None:
    error = RemoteAcpError(ErrorKind.RESPONSE_TIMEOUT, "no answer")
    ceilings = [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]
    for attempt, ceiling in enumerate(ceilings, start=1):
        backoff = error.backoff_ms(attempt)
        assert backoff is not None and ceiling * 4 // 5 <= backoff <= ceiling


@pytest.mark.parametrize("kind", sorted(ErrorKind, key=str))
def test_backoff_of_a_final_error_is_none(kind: ErrorKind) -> None:
    error = RemoteAcpError(kind, "x")
    if kind.value in RETRYABLE_KINDS:
        backoff = error.backoff_ms(1)
        assert backoff is not None and 8_000 <= backoff <= 10_000
    else:
        assert error.backoff_ms(1) is None


def test_backoff_of_a_retryable_error_rejects_attempt_zero() -> None:
    with pytest.raises(ValueError, match="^retry attempts count from 1, got 0$"):
        RemoteAcpError(ErrorKind.PORT_EXIT, "x").backoff_ms(0)


REATTACH_CAUSES = {
    # cause: (retryable, verdict)
    Cause.SESSION_EXPIRED: (False, None),
    Cause.NOT_OWNER: (False, None),
    Cause.ATTACHED_ELSEWHERE: (True, None),
    Cause.OFFSET_LOST: (False, None),
    Cause.NO_REATTACH_WINDOW: (False, "probe_failed"),
}


@pytest.mark.parametrize("cause", list(REATTACH_CAUSES), ids=str)
def test_the_reattach_causes_go_with_port_exit_and_their_retry_class(cause: Cause) -> None:
    retryable, verdict = REATTACH_CAUSES[cause]
    error = RemoteAcpError(ErrorKind.PORT_EXIT, "x", cause=cause)
    assert (error.retryable, CAUSES[cause].verdict) == (retryable, verdict)
    assert (error.backoff_ms(1) is not None) is retryable
    assert error.fix and fix_for(cause) == error.fix  # names no fact: the same wherever it is met


def test_the_reattach_causes_values_are_the_json_vocabulary() -> None:
    assert {cause.value for cause in REATTACH_CAUSES} == {
        "session_expired",
        "not_owner",
        "attached_elsewhere",
        "offset_lost",
        "no_reattach_window",
    }
