"""Turn disposition by stop reason, and the choice of a refusing permission option."""

from __future__ import annotations

from typing import Any

import pytest

from remote_acp.errors import RETRYABLE, ErrorKind
from remote_acp.events import TurnCancelled, TurnCompleted, TurnFailed
from remote_acp.protocol.disposition import Disposition, choose_refusal, disposition_for_stop_reason

# -- stop reasons -------------------------------------------------------------------------------


@pytest.mark.parametrize("cancel_requested", [False, True])
@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", Disposition(TurnCompleted, None, "the agent completed the turn")),
        (
            "refusal",
            Disposition(TurnFailed, ErrorKind.TURN_REFUSED, "the agent refused to answer the prompt"),
        ),
        (
            "max_tokens",
            Disposition(TurnFailed, ErrorKind.TURN_TOKEN_LIMIT, "the agent stopped at its token limit for the turn"),
        ),
        (
            "max_turn_requests",
            Disposition(
                TurnFailed,
                ErrorKind.TURN_REQUEST_LIMIT,
                "the agent stopped at its model-request limit for the turn; a new turn starts a new budget",
            ),
        ),
    ],
)
def test_known_stop_reasons(stop_reason: str, expected: Disposition, cancel_requested: bool) -> None:
    # A cancellation the client asked for does not change how these reasons read.
    assert disposition_for_stop_reason(stop_reason, cancel_requested=cancel_requested) == expected


def test_cancelled_when_cancellation_was_asked() -> None:
    assert disposition_for_stop_reason("cancelled", cancel_requested=True) == Disposition(
        TurnCancelled, ErrorKind.TURN_CANCELLED, "the turn was cancelled"
    )


def test_cancelled_without_a_cancellation_is_a_failure() -> None:
    assert disposition_for_stop_reason("cancelled", cancel_requested=False) == Disposition(
        TurnFailed,
        ErrorKind.TURN_FAILED,
        "agent reported a cancelled stop reason without a cancellation on either side",
    )


@pytest.mark.parametrize(
    ("stop_reason", "shown"),
    [
        ("paused", "paused"),
        ("", ""),
        ("END_TURN", "END_TURN"),
        ("Cancelled", "Cancelled"),
        (None, "None"),
        (5, "5"),
        (True, "True"),
        (["end_turn"], "['end_turn']"),
        ({"reason": "end_turn"}, "{'reason': 'end_turn'}"),
    ],
)
def test_any_other_value_is_an_unknown_outcome(stop_reason: Any, shown: str) -> None:
    for cancel_requested in (False, True):
        assert disposition_for_stop_reason(stop_reason, cancel_requested=cancel_requested) == Disposition(
            TurnFailed,
            ErrorKind.TURN_OUTCOME_UNKNOWN,
            f'agent reported an unrecognized stop reason: "{shown}"',
        )


def test_unknown_stop_reason_message_is_capped_at_500_runes() -> None:
    got = disposition_for_stop_reason("r" * 2000, cancel_requested=False)
    prefix = 'agent reported an unrecognized stop reason: "'
    assert got.message == prefix + "r" * (499 - len(prefix)) + "…"
    assert len(got.message) == 500
    assert got.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN


def test_retry_classes_of_the_stop_reasons() -> None:
    def kind(reason: str, cancel_requested: bool = False) -> ErrorKind:
        error_kind = disposition_for_stop_reason(reason, cancel_requested=cancel_requested).error_kind
        assert error_kind is not None
        return error_kind

    assert kind("refusal") not in RETRYABLE
    assert kind("max_tokens") not in RETRYABLE
    assert kind("max_turn_requests") in RETRYABLE
    assert kind("cancelled", True) not in RETRYABLE
    assert kind("cancelled", False) in RETRYABLE
    assert kind("whatever") not in RETRYABLE


def test_disposition_is_frozen() -> None:
    disposition = disposition_for_stop_reason("end_turn", cancel_requested=False)
    with pytest.raises(AttributeError):
        disposition.message = "changed"  # type: ignore[misc]


# -- permission refusal -------------------------------------------------------------------------


def option(option_id: Any, kind: Any, name: str = "") -> dict[str, Any]:
    return {"optionId": option_id, "kind": kind, "name": name or f"{kind} option"}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            [option("allow", "allow_once"), option("no", "reject_once"), option("never", "reject_always")],
            "no",
            id="reject-once",
        ),
        pytest.param(
            [option("never", "reject_always"), option("no", "reject_once")],
            "no",
            id="reject-once-wins-over-earlier-reject-always",
        ),
        pytest.param(
            [option("no-1", "reject_once"), option("no-2", "reject_once")],
            "no-1",
            id="first-reject-once",
        ),
        pytest.param(
            [
                option("allow", "allow_always"),
                option("never-1", "reject_always"),
                option("never-2", "reject_always"),
            ],
            "never-1",
            id="first-reject-always-when-no-reject-once",
        ),
        pytest.param(
            [option("allow", "allow_once"), option("always", "allow_always")],
            None,
            id="only-allow-options",
        ),
        pytest.param(
            [option("reject", "allow_once", "Reject"), option("reject_once", "allow_always", "reject_once")],
            None,
            id="allow-options-named-like-refusals-are-never-chosen",
        ),
        pytest.param([], None, id="no-options"),
        pytest.param(
            [option(5, "reject_once"), option("no", "reject_once")],
            "no",
            id="reject-once-without-string-id-skipped",
        ),
        pytest.param(
            [{"kind": "reject_once"}, option("never", "reject_always")],
            "never",
            id="reject-once-without-id-falls-to-reject-always",
        ),
        pytest.param(
            ["reject_once", None, 5, option("never", "reject_always")],
            "never",
            id="non-object-options-skipped",
        ),
        pytest.param(
            [option("x", "REJECT_ONCE"), option("y", None), option("z", "reject")],
            None,
            id="unknown-kinds-are-not-refusals",
        ),
    ],
)
def test_choose_refusal(options: list[Any], expected: str | None) -> None:
    params = {"sessionId": "s1", "toolCall": {"toolCallId": "t1"}, "options": options}
    assert choose_refusal(params) == expected


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        "options",
        5,
        {},
        {"options": None},
        {"options": {"a": option("no", "reject_once")}},
        {"options": "x"},
    ],
)
def test_choose_refusal_without_an_options_list(params: Any) -> None:
    assert choose_refusal(params) is None


def test_choose_refusal_tolerates_extra_fields() -> None:
    params = {
        "options": [{"optionId": "no", "kind": "reject_once", "name": "No", "_meta": {"x": 1}, "extra": True}],
        "_meta": {},
    }
    assert choose_refusal(params) == "no"
