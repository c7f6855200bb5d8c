"""Reading an agent's JSON-RPC error, how a lost agent ended, and the exit status of each failure:
pure functions, no processes."""

from __future__ import annotations

import pytest

from remote_acp.cli.exit_codes import EXIT_BY_KIND, exit_code_for
from remote_acp.errors import Cause, ErrorKind
from remote_acp.masking import Masker
from remote_acp.protocol.jsonrpc import RpcErrorBody
from remote_acp.protocol.rpc_failure import DATA_TEXT_CAP, HINT_CAP, auth_hint, call_error, data_text
from remote_acp.session.exits import ended_cause, exit_facts
from remote_acp.targets.exit_status import ExitStatus

SECRET = "sk-live-0123456789abcdef"
MASKER = Masker([SECRET])


@pytest.mark.parametrize("method", ["initialize", "session/new", "session/load", "session/prompt", "vendor/x"])
def test_minus_32000_is_a_refused_credential_at_any_call(method: str) -> None:
    error = call_error(method, RpcErrorBody(-32000, "Authentication required"), MASKER)
    assert (error.kind, error.cause, error.retryable) == (
        ErrorKind.CREDENTIAL_UNVERIFIED,
        Cause.CREDENTIAL_REFUSED,
        False,
    )
    where = "" if method in ("initialize", "session/new") else f" at {method}"
    assert str(error) == f"the agent runtime refused its credential{where}: 'Authentication required'"


def test_data_is_compact_json_masked_escaped_and_bounded() -> None:
    data = {"details": "Claude Code process exited with code 1", "key": SECRET, "ctl": "\x1b[2J", "log": "y" * 5000}
    error = call_error("session/prompt", RpcErrorBody(-32603, "Internal error", data), MASKER)
    assert (error.kind, error.cause, error.retryable) == (ErrorKind.RESPONSE_ERROR, Cause.AGENT_ERROR, True)
    head = '{"details":"Claude Code process exited with code 1","key":"***","ctl":"\\u001b[2J"'
    assert str(error).startswith(f"session/prompt error -32603: Internal error; data: {head}")
    assert error.facts.rpc_code == -32603
    assert error.facts.rpc_data is not None and error.facts.rpc_data.startswith(head)
    assert len(error.facts.rpc_data) == 2000
    quoted = str(error).split("; data: ", 1)[1]
    assert len(quoted) == DATA_TEXT_CAP and quoted.endswith("\u2026")
    assert SECRET not in str(error) + error.facts.rpc_data


def test_data_text() -> None:
    assert data_text(None) is None
    assert data_text({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert data_text("plain") == '"plain"'


def test_auth_hint_names_what_each_method_says() -> None:
    methods = [
        {
            "id": "copilot-login",
            "name": "Log in with Copilot CLI",
            "description": "Run `copilot login` in the terminal",
        },
        {"id": "api-key", "description": f"set the key (not {SECRET})"},
        {"id": "bare"},  # an id alone says nothing about how
        {"id": 3, "name": None},
        {"description": "no id, no name"},
        "not an object",
    ]
    assert auth_hint(methods, MASKER) == (
        "Log in with Copilot CLI: Run `copilot login` in the terminal; api-key: set the key (not ***); no id, no name"
    )
    assert auth_hint([], MASKER) == ""
    long = auth_hint([{"name": "n\nx" * 1000}], MASKER)
    assert len(long) == HINT_CAP and "\n" not in long


@pytest.mark.parametrize(
    ("status", "remote", "cause"),
    [
        (None, False, Cause.AGENT_LOST),
        (ExitStatus(None, None), False, Cause.AGENT_LOST),
        (ExitStatus(None, 9), False, Cause.AGENT_KILLED),
        (ExitStatus(1), False, Cause.AGENT_EXITED),
        (ExitStatus(255), False, Cause.AGENT_EXITED),
        (ExitStatus(255), True, Cause.LINK_LOST),  # ssh's own failure
        (ExitStatus(137), True, Cause.AGENT_KILLED),  # the remote script's 128+9
        (ExitStatus(137), False, Cause.AGENT_EXITED),
        (ExitStatus(3), True, Cause.AGENT_EXITED),
    ],
)
def test_how_a_lost_agent_ended(status: ExitStatus | None, remote: bool, cause: Cause) -> None:
    assert ended_cause(status, remote=remote) is cause


def test_exit_facts() -> None:
    assert exit_facts(ExitStatus(None, 15)).to_json() == {"signal": 15}
    assert exit_facts(ExitStatus(4)).to_json() == {"exit_status": 4}
    assert exit_facts(None).to_json() == {}


@pytest.mark.parametrize(
    ("kind", "cause", "code"),
    [
        (None, None, 0),
        ("turn_cancelled", None, 8),  # by kind alone, as before
        ("turn_cancelled", "cancelled", 8),
        ("turn_cancelled", Cause.STALLED, 6),  # nobody cancelled it: a retryable turn failure
        ("turn_timeout", "turn_deadline", 6),
        ("credential_unverified", "credential_refused", 4),
        ("port_exit", "agent_exited", 3),  # it exits before it answers, on every start: fix the launch
        ("no_such_kind", None, 1),
    ],
)
def test_exit_status_by_kind_and_cause(kind: str | None, cause: str | None, code: int) -> None:
    assert exit_code_for(kind, cause) == code


def test_every_kind_has_an_exit_status() -> None:
    assert set(EXIT_BY_KIND) == {kind.value for kind in ErrorKind}
    assert all(exit_code_for(kind.value) == EXIT_BY_KIND[kind.value] for kind in ErrorKind)
