"""The unattended answers to agent requests, as data."""

from __future__ import annotations

from typing import Any

import pytest

from remote_acp.protocol.unattended import (
    CANCELLED_OUTCOME,
    ELICITATION_NOTICE,
    GATED_TOOLS_NOTICE,
    NO_REFUSAL_NOTICE,
    REFUSED_NOTICE,
    GatingNotice,
    Reply,
    answer_agent_request,
)

OPTIONS = [
    {"optionId": "allow", "kind": "allow_once", "name": "Allow"},
    {"optionId": "always", "kind": "allow_always", "name": "Always"},
    {"optionId": "never", "kind": "reject_always", "name": "Never"},
    {"optionId": "no", "kind": "reject_once", "name": "No"},
]


def test_permission_is_refused_with_the_first_reject_once() -> None:
    reply = answer_agent_request("session/request_permission", {"options": OPTIONS}, winding_down=False)
    assert reply == Reply(
        result={"outcome": {"outcome": "selected", "optionId": "no"}}, notice=REFUSED_NOTICE, refused=True
    )


def test_permission_without_reject_once_takes_reject_always() -> None:
    reply = answer_agent_request("session/request_permission", {"options": OPTIONS[:3]}, winding_down=False)
    assert reply.result == {"outcome": {"outcome": "selected", "optionId": "never"}}


@pytest.mark.parametrize("params", [{"options": OPTIONS[:2]}, {"options": []}, {}, None, {"options": "x"}])
def test_permission_without_a_refusing_option_needs_a_person(params: Any) -> None:
    reply = answer_agent_request("session/request_permission", params, winding_down=False)
    assert reply == Reply(
        result=CANCELLED_OUTCOME, notice=NO_REFUSAL_NOTICE, needs_person="a permission with no refusing option"
    )


def test_permission_while_winding_down_is_cancelled() -> None:
    reply = answer_agent_request("session/request_permission", {"options": OPTIONS}, winding_down=True)
    assert reply == Reply(result=CANCELLED_OUTCOME)


def test_elicitation_ends_the_turn_for_a_person() -> None:
    reply = answer_agent_request("elicitation/create", {"message": "name?"}, winding_down=False)
    assert reply == Reply(error="method not found", notice=ELICITATION_NOTICE, needs_person="an answer to a question")


@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/kill"])
def test_unadvertised_client_methods_are_malformed(method: str) -> None:
    assert answer_agent_request(method, {}, winding_down=False) == Reply(error="method not found", malformed=method)


@pytest.mark.parametrize("method", ["craft/drainMidTurnQueue", "_vendor/x", "session/unknown"])
def test_other_requests_get_method_not_found_only(method: str) -> None:
    assert answer_agent_request(method, {}, winding_down=False) == Reply(error="method not found")


def test_gating_notice_once_and_only_with_delivered_servers() -> None:
    none = GatingNotice(tool_servers_delivered=0)
    assert none.on_refusal() is None and none.on_refusal() is None
    some = GatingNotice(tool_servers_delivered=2)
    assert some.on_refusal() == GATED_TOOLS_NOTICE
    assert some.on_refusal() is None
