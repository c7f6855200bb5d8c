"""Session start against real agent subprocesses: the handshake and every start-up error."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import ErrorKind, LocalTarget, RemoteAcpError, open_session
from remote_acp.errors import Cause
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


async def start_error(workspace: str, *args: str, **overrides: object) -> RemoteAcpError:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(scripted(*args), **overrides)):
            pass
    return info.value


@pytest.mark.both_backends
async def test_handshake_records_session_and_agent(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record), "--name", "demo"))) as s:
        assert s.info is not None
        assert s.session_id == "sess-1"
        assert s.pid is not None and s.info.pid == s.pid
        assert (s.info.agent_name, s.info.agent_version) == ("demo", "1.0.0")
        assert s.info.obtained == "new"
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    init, new = sent[0], sent[1]
    assert init["method"] == "initialize"
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    assert new["method"] == "session/new"
    assert new["params"] == {"cwd": workspace, "mcpServers": []}


async def test_agent_gets_full_environment_workspace_and_own_group(
    workspace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_ACP_PROBE", "inherited")
    dump = tmp_path / "env.json"
    async with open_session(workspace, fast_options(scripted("--env-dump", str(dump)))) as s:
        assert s.pid is not None
        assert os.getpgid(s.pid) == s.pid  # a process group of its own
        assert os.getsid(s.pid) == s.pid
    env = json.loads(dump.read_text())
    assert env["REMOTE_ACP_PROBE"] == "inherited"
    assert env["__cwd__"] == workspace


@pytest.mark.parametrize(
    ("workspace_value", "fragment"),
    [
        ("", "empty"),
        ("relative/dir", "not absolute"),
        ("/nonexistent/remote-acp-ws", "does not exist"),
    ],
)
async def test_invalid_workspace(workspace_value: str, fragment: str) -> None:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace_value, fast_options(scripted())):
            pass
    assert info.value.kind is ErrorKind.INVALID_WORKSPACE_CWD
    assert fragment in str(info.value)
    assert not info.value.retryable


async def test_workspace_that_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    err = await start_error(str(file))
    assert err.kind is ErrorKind.INVALID_WORKSPACE_CWD
    assert "not a directory" in str(err)


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("", "empty or whitespace-only"),
        ("   ", "empty or whitespace-only"),
        ([], "empty or whitespace-only"),
        ("remote-acp-no-such-agent --acp", "'remote-acp-no-such-agent' was not found on PATH"),
        ("/nonexistent/agent --acp", "'/nonexistent/agent' was not found"),
        ("agent 'unclosed", "cannot be split"),
    ],
)
async def test_agent_not_found(workspace: str, command: str | list[str], fragment: str) -> None:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(command)):
            pass
    assert info.value.kind is ErrorKind.AGENT_NOT_FOUND
    assert fragment in str(info.value)


async def test_string_command_is_split_with_shell_rules(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec ord.jsonl"
    command = f"{sys.executable} -m remote_acp.testing.scripted_agent --name 'two words' --record '{record}'"
    async with open_session(workspace, fast_options(command)) as s:
        assert s.info is not None and s.info.agent_name == "two words"
    assert record.exists()


async def test_crash_at_initialize_gives_early_exit_report_with_masked_stderr(
    workspace: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DEMO_API_KEY", "sk-very-secret-value")
    err = await start_error(
        workspace,
        "--crash-at",
        "initialize",
        "--exit-code",
        "7",
        "--stderr",
        "fatal: bad key sk-very-secret-value",
    )
    assert err.kind is ErrorKind.PORT_EXIT
    assert err.message == "the agent runtime exited before responding: exit status 7"
    assert (err.cause, err.retryable, err.facts.exit_status) == (Cause.AGENT_EXITED, False, 7)
    assert "fatal: bad key ***" in err.detail
    assert "sk-very-secret-value" not in str(err)
    # a failed start logs the agent's stderr lines at warning, masked
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("agent stderr: ")]
    assert "agent stderr: fatal: bad key ***" in lines
    assert all("sk-very-secret-value" not in r.getMessage() + str(r.__dict__) for r in caplog.records)


async def test_crash_at_session_new(workspace: str) -> None:
    err = await start_error(workspace, "--crash-at", "new", "--exit-code", "4", "--stderr", "no model")
    assert err.kind is ErrorKind.PORT_EXIT
    assert "exit status 4" in err.message
    assert err.detail == "no model"


async def test_exit_without_stderr_says_so(workspace: str) -> None:
    err = await start_error(workspace, "--crash-at", "initialize", "--stderr", "")
    assert err.kind is ErrorKind.PORT_EXIT
    assert err.detail == "no standard-error output"


async def test_wrong_protocol_version(workspace: str) -> None:
    err = await start_error(workspace, "--protocol-version", "2")
    assert err.kind is ErrorKind.RESPONSE_ERROR and not err.retryable  # the same runtime answers the same
    assert str(err) == "agent reported protocol version 2, want 1"


@pytest.mark.parametrize("flag", ["--init-error", "--new-error"])
async def test_credential_refusal(workspace: str, flag: str) -> None:
    err = await start_error(workspace, f"{flag}=-32000:Gemini API key is missing")
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED
    assert str(err) == "the agent runtime refused its credential: 'Gemini API key is missing'"
    assert err.cause is Cause.CREDENTIAL_REFUSED and not err.retryable
    assert (err.facts.rpc_code, err.facts.rpc_data) == (-32000, None)


@pytest.mark.parametrize(("flag", "method"), [("--init-error", "initialize"), ("--new-error", "session/new")])
async def test_other_rpc_error(workspace: str, flag: str, method: str) -> None:
    err = await start_error(workspace, f"{flag}=-32603:boom")
    assert err.kind is ErrorKind.RESPONSE_ERROR
    assert str(err) == f"{method} error -32603: boom"
    assert err.cause is Cause.AGENT_ERROR and err.retryable and err.facts.rpc_code == -32603


RAISE_READ = (
    "raise read_timeout_ms if the agent needs longer (--read-timeout-ms of remote-acp run, "
    "--handshake-timeout-ms of check host)"
)
RAISE_FLOOR = "raise initialize_floor_ms (initialize waits the larger of it and read_timeout_ms)"


@pytest.mark.parametrize(
    ("method", "read_ms", "floor_ms", "said"),
    [
        # initialize waits max(read_timeout_ms, initialize_floor_ms): the larger one is named.
        ("initialize", 300, 600, f"initialize: no answer within initialize_floor_ms (600 ms); {RAISE_FLOOR}"),
        ("initialize", 600, 300, f"initialize: no answer within read_timeout_ms (600 ms); {RAISE_READ}"),
        ("new", 300, 600, f"session/new: no answer within read_timeout_ms (300 ms); {RAISE_READ}"),
    ],
)
async def test_unanswered_handshake_names_its_bound(
    workspace: str, method: str, read_ms: int, floor_ms: int, said: str
) -> None:
    err = await start_error(workspace, "--never-answer", method, read_timeout_ms=read_ms, initialize_floor_ms=floor_ms)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.RESPONSE_TIMEOUT, Cause.NO_ANSWER, True)
    assert str(err) == f"timed out waiting for the agent to answer {said}"
    assert err.facts.bound_ms == (max(read_ms, floor_ms) if method == "initialize" else read_ms)


async def test_stderr_flood_does_not_block_start(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted("--stderr-flood", str(4 * 1024 * 1024)))) as s:
        result = await s.run_turn("hello")
    assert result.ok


async def test_runtime_error_text_quoting_a_secret_is_masked(workspace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_API_KEY", "sk-live-0123456789abcdef")
    err = await start_error(workspace, "--init-error=-32000:Incorrect API key provided: sk-live-0123456789abcdef")
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED
    assert str(err) == "the agent runtime refused its credential: 'Incorrect API key provided: ***'"


async def test_nul_bytes_are_refused_before_anything_starts(workspace: str) -> None:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options([sys.executable, "-c", "pass\0"])):
            pass
    assert info.value.kind is ErrorKind.AGENT_NOT_FOUND
    assert str(info.value) == "the agent command contains a NUL character"
    target = LocalTarget(extra_env={"BROKEN": "a\0b"})
    with pytest.raises(RemoteAcpError) as env_info:
        async with open_session(workspace, fast_options(scripted()), target):
            pass
    assert env_info.value.kind is ErrorKind.AGENT_NOT_FOUND and not env_info.value.retryable
    assert str(env_info.value) == "the agent's environment gives BROKEN a value with a NUL character"


STOPS_READING_AFTER_INITIALIZE = (
    "import json, os, sys, time\n"
    "msg = json.loads(sys.stdin.readline())\n"
    "os.close(0)\n"  # no reader is left for the pipe
    "print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': {'protocolVersion': 1}}), flush=True)\n"
    "time.sleep(30)\n"
)


async def test_agent_that_stops_reading_during_the_handshake_fails_fast(workspace: str) -> None:
    # session/new cannot be written: that is a lost connection, reported within the drain
    # bound, not a wait for an answer that cannot come.
    agent = [sys.executable, "-c", STOPS_READING_AFTER_INITIALIZE]
    with anyio.fail_after(10), pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(agent, output_drain_ms=500, read_timeout_ms=20_000)):
            pass
    assert info.value.kind is ErrorKind.PORT_EXIT
    assert str(info.value) == "agent connection ended before responding"
