"""How an agent's failures read, provoked for real through the scripted agent: a JSON-RPC error's
code and data at any call, a refused credential wherever it comes, a start-up call that outlives
its bound, an agent that ends mid-turn, and the bounds and cancels that end a turn."""

from __future__ import annotations

import json
import os
import signal

import anyio
import pytest

from remote_acp import ErrorKind, Event, RemoteAcpError, SessionStarted, TurnFailed, TurnResult, open_session
from remote_acp.cli.exit_codes import exit_code_for
from remote_acp.errors import Cause
from remote_acp.session.verification import verify_credentials
from tests.support.agents import fast_options, scripted

pytestmark = pytest.mark.anyio

CLAUDE_DATA = json.dumps({"details": "Claude Code process exited with code 1"})
SHOWN_DATA = 'data: {"details":"Claude Code process exited with code 1"}'
COPILOT = json.dumps(
    {"id": "copilot-login", "name": "Log in with Copilot CLI", "description": "Run `copilot login` in the terminal"}
)
SECRET = "sk-live-0123456789abcdef"


async def start_error(workspace: str, *args: str, resume: str | None = None, **overrides: object) -> RemoteAcpError:
    with anyio.fail_after(20), pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(scripted(*args), **overrides), resume=resume):
            pass
    return info.value


async def one_turn(workspace: str, prompt: str, *args: str, **overrides: object) -> tuple[list[Event], TurnResult]:
    events: list[Event] = []
    with anyio.fail_after(20):
        async with open_session(workspace, fast_options(scripted(*args), **overrides)) as s:
            result = await s.run_turn(prompt, events.append)
    return events, result


def failure(result: TurnResult) -> RemoteAcpError:
    assert result.error is not None, f"the turn completed: {result}"
    return result.error


# -- a JSON-RPC error's data ----------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "method"), [("--init-error", "initialize"), ("--new-error", "session/new")])
async def test_a_start_error_keeps_its_data(workspace: str, flag: str, method: str) -> None:
    err = await start_error(workspace, f"{flag}=-32603:Internal error", "--error-data", CLAUDE_DATA)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.RESPONSE_ERROR, Cause.AGENT_ERROR, True)
    assert str(err) == f"{method} error -32603: Internal error; {SHOWN_DATA}"
    assert err.facts.rpc_code == -32603
    assert err.facts.rpc_data == '{"details":"Claude Code process exited with code 1"}'
    facts = {"rpc_code": -32603, "rpc_data": err.facts.rpc_data}
    if method != "initialize":  # initialize answered first: the agent's name is a fact too
        facts |= {"agent_name": "scripted-agent", "agent_version": "1.0.0"}
    assert err.to_json()["facts"] == facts


@pytest.mark.both_backends
async def test_a_prompt_error_keeps_its_data(workspace: str) -> None:
    events, result = await one_turn(workspace, "@error=-32603", "--error-data", CLAUDE_DATA)
    err = failure(result)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.RESPONSE_ERROR, Cause.AGENT_ERROR, True)
    assert str(err) == f"session/prompt error -32603: scripted failure; {SHOWN_DATA}"
    assert (err.facts.rpc_code, err.facts.rpc_data) == (-32603, '{"details":"Claude Code process exited with code 1"}')
    assert isinstance(events[-1], TurnFailed) and events[-1].message == str(err)


async def test_error_data_is_masked_then_bounded(workspace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_API_KEY", SECRET)
    data = json.dumps({"key": SECRET, "log": "x" * 10_000, "tail": SECRET})
    err = await start_error(workspace, "--new-error=-32603:bad key " + SECRET, "--error-data", data)
    assert SECRET not in str(err) and SECRET not in json.dumps(err.to_json())
    assert str(err).startswith('session/new error -32603: bad key ***; data: {"key":"***","log":"xxx')
    assert len(str(err)) < 500  # the data quoted in the message is bounded ...
    assert err.facts.rpc_data is not None and err.facts.rpc_data.startswith('{"key":"***","log":"xxx')
    assert len(err.facts.rpc_data) == 2000 and err.facts.rpc_data.endswith("\u2026")  # ... and in the facts


# -- a refused credential, at any call ------------------------------------------------------------


@pytest.mark.both_backends
async def test_a_credential_refused_at_the_prompt_is_not_retryable(workspace: str) -> None:
    # Claude's ACP adapter accepts session/new and refuses only the prompt.
    events, result = await one_turn(workspace, "@error=-32000")
    err = failure(result)
    assert (err.kind, err.cause, err.retryable) == (
        ErrorKind.CREDENTIAL_UNVERIFIED,
        Cause.CREDENTIAL_REFUSED,
        False,
    )
    assert str(err) == (
        "the agent runtime refused its credential at session/prompt: "
        "'Authentication required: scripted credential refusal'"
    )
    assert err.facts.rpc_code == -32000 and err.backoff_ms(1) is None
    assert result.outcome == "turn_failed" and isinstance(events[-1], TurnFailed)
    assert events[-1].error_kind == "credential_unverified"
    payload = result.to_json()
    assert (payload["error_kind"], payload["cause"], payload["retryable"]) == (
        "credential_unverified",
        "credential_refused",
        False,
    )
    assert exit_code_for(payload["error_kind"], payload["cause"]) == 4


@pytest.mark.parametrize("flag", ["--new-error", "--init-error"])
async def test_a_credential_refusal_passes_on_how_to_log_in(workspace: str, flag: str) -> None:
    # initialize's authMethods are known only once it answered: its own refusal cannot quote them.
    err = await start_error(workspace, f"{flag}=-32000:Authentication required", "--auth-method", COPILOT)
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED and err.cause is Cause.CREDENTIAL_REFUSED
    refused = "the agent runtime refused its credential: 'Authentication required'"
    if flag == "--new-error":
        assert str(err) == (
            f"{refused}; the agent says how to log in: Log in with Copilot CLI: Run `copilot login` in the terminal"
        )
    else:
        assert str(err) == refused


async def test_login_instructions_reach_a_refused_prompt_masked(
    workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_API_KEY", SECRET)
    methods = [
        json.dumps({"id": "api-key", "description": f"export DEMO_API_KEY (not {SECRET})"}),
        json.dumps({"id": "oauth", "name": "Log in with a browser"}),
        json.dumps({"id": 7, "name": ["not", "text"]}),  # says nothing readable: left out
    ]
    args = [word for method in methods for word in ("--auth-method", method)]
    _, result = await one_turn(workspace, "@error=-32000", *args, "--error-data", json.dumps({"reason": SECRET}))
    err = failure(result)
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED and not err.retryable
    assert str(err) == (
        "the agent runtime refused its credential at session/prompt: "
        "'Authentication required: scripted credential refusal'; "
        'data: {"reason":"***"}; '
        "the agent says how to log in: api-key: export DEMO_API_KEY (not ***); Log in with a browser"
    )
    assert err.facts.rpc_data == '{"reason":"***"}'


@pytest.mark.parametrize(("advertise", "flag"), [("load", "--load-error"), ("resume", "--resume-error")])
async def test_a_credential_refused_at_continuation_ends_the_start(workspace: str, advertise: str, flag: str) -> None:
    # Not a failed continuation to fall back from: the same credential would start nothing.
    err = await start_error(workspace, "--advertise", advertise, f"{flag}=-32000:no key", resume="sess-old")
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.CREDENTIAL_UNVERIFIED, Cause.CREDENTIAL_REFUSED, False)
    method = "session/load" if advertise == "load" else "session/resume"
    assert str(err) == f"the agent runtime refused its credential at {method}: 'no key'"


async def test_a_failed_continuation_still_falls_back(workspace: str) -> None:
    async with open_session(
        workspace, fast_options(scripted("--advertise", "load", "--load-error=-32603:gone")), resume="sess-old"
    ) as s:
        assert s.info.obtained == "fell back"


# -- a start-up call that outlives its bound ------------------------------------------------------


async def test_a_slow_session_new_names_the_bound_and_how_to_raise_it(workspace: str) -> None:
    err = await start_error(workspace, "--answer-after", "new=30", read_timeout_ms=300)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.RESPONSE_TIMEOUT, Cause.NO_ANSWER, True)
    assert err.facts.bound_ms == 300
    assert str(err) == (
        "timed out waiting for the agent to answer session/new: no answer within read_timeout_ms (300 ms); "
        "raise read_timeout_ms if the agent needs longer (--read-timeout-ms of remote-acp run, "
        "--handshake-timeout-ms of check host)"
    )
    assert "read_timeout_ms" in err.fix


async def test_the_same_slow_session_new_starts_within_a_raised_bound(workspace: str) -> None:
    with anyio.fail_after(20):
        async with open_session(workspace, fast_options(scripted("--answer-after", "new=0.5"), read_timeout_ms=10_000)):
            pass


# -- an agent that ends mid-turn -----------------------------------------------------------------


@pytest.mark.both_backends
async def test_an_agent_killed_mid_turn_is_agent_killed(workspace: str) -> None:
    with anyio.fail_after(20):
        async with open_session(workspace, fast_options(scripted())) as s:
            async with s.turn("@never") as turn:
                async for event in turn:
                    if isinstance(event, SessionStarted):
                        assert s.pid is not None
                        os.kill(s.pid, signal.SIGKILL)
            err = failure(turn.result)
    assert err.kind is ErrorKind.PORT_EXIT
    assert (err.cause, err.retryable, err.facts.signal) == (Cause.AGENT_KILLED, True, signal.SIGKILL)
    assert err.detail.startswith("killed by signal SIGKILL")


# -- bounds and cancels, as the exit status sees them ---------------------------------------------


@pytest.mark.both_backends
async def test_a_callers_cancel_is_cancelled_and_exits_8(workspace: str) -> None:
    with anyio.fail_after(20):
        async with open_session(workspace, fast_options(scripted())) as s:
            async with s.turn("@never") as turn:
                async for event in turn:
                    if isinstance(event, SessionStarted):
                        turn.cancel()
    err = failure(turn.result)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.TURN_CANCELLED, Cause.CANCELLED, False)
    assert str(err) == "the turn was cancelled"
    assert exit_code_for(err.kind, err.cause) == 8


async def test_a_stall_and_a_deadline_exit_as_retryable_turn_failures(workspace: str) -> None:
    _, stalled = await one_turn(workspace, "@sleep=30", stall_timeout_ms=300)
    _, late = await one_turn(workspace, "@sleep=30", turn_timeout_ms=300)
    for result, kind, cause in [
        (stalled, ErrorKind.TURN_CANCELLED, Cause.STALLED),
        (late, ErrorKind.TURN_TIMEOUT, Cause.TURN_DEADLINE),
    ]:
        err = failure(result)
        assert (err.kind, err.cause, err.retryable, err.facts.bound_ms) == (kind, cause, True, 300)
        assert exit_code_for(result.to_json()["error_kind"], result.to_json()["cause"]) == 6


# -- the result of a turn ------------------------------------------------------------------------


async def test_a_turns_result_is_read_once_it_ended(workspace: str) -> None:
    with anyio.fail_after(20):
        async with open_session(workspace, fast_options(scripted())) as s:
            async with s.turn("@never") as waiting:
                assert not waiting.ended  # the agent never answers until cancelled
                with pytest.raises(RuntimeError, match="the turn has not ended"):
                    _ = waiting.result
                waiting.cancel()
                async for _ in waiting:
                    pass
                assert waiting.ended and waiting.result.cause is Cause.CANCELLED
            async with s.turn("hello") as turn:
                async for _ in turn:
                    pass
            result: TurnResult = turn.result  # typed: no `assert result is not None`
    assert result.ok and result.last_message == "hello" and result.cause is None
    assert result.to_json()["cause"] is None and result.to_json()["retryable"] is False


# -- verification ---------------------------------------------------------------------------------


async def test_verification_says_whether_session_new_proved_the_credential(workspace: str) -> None:
    with anyio.fail_after(20):
        silent = await verify_credentials(workspace, fast_options(scripted()))
        asking = await verify_credentials(workspace, fast_options(scripted("--auth-method", COPILOT)))
    # An agent that lists no auth methods may still refuse at its first prompt, as Claude's does.
    assert (silent.auth_methods, silent.conclusive) == ((), False)
    assert (asking.auth_methods, asking.conclusive) == (("copilot-login",), True)


async def test_a_failure_after_initialize_names_the_agent_it_answered_as(workspace: str) -> None:
    command = scripted("--name", "copilot", "--agent-version", "1.2.3", "--new-error", "-32000")
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as info:
        await verify_credentials(workspace, fast_options(command))
    err = info.value
    assert (err.kind, err.cause) == (ErrorKind.CREDENTIAL_UNVERIFIED, Cause.CREDENTIAL_REFUSED)
    assert (err.facts.agent_name, err.facts.agent_version) == ("copilot", "1.2.3")
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as before:
        await verify_credentials(workspace, fast_options(scripted("--crash-at", "initialize")))
    assert before.value.facts.agent_name is None  # it never said who it was
