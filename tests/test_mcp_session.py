"""Tool servers delivered to a real local agent (the scriptable agent), which records what it
receives and says the servers back; secrets of env and headers never reach a log line."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from remote_acp import ErrorKind, RemoteAcpError, open_session
from remote_acp.mcp import McpServer, load_mcp_config, render_server
from remote_acp.session.capabilities import Capability, CapabilityState
from remote_acp.session.continuation import OriginLedger
from remote_acp.session.verification import verify_credentials
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

TOKEN = "ghp_session-token-9f8e7d6c"
HEADER = "Bearer session-header-5a4b3c"
MINE = "caller-secret-1a2b3c4d"
CONFIG = {
    "mcpServers": {
        "files": {
            "command": "/usr/bin/mcp-files",
            "args": ["--root", "/srv"],
            "env": {"Z": "zz-value", "TOKEN": TOKEN},
        },
        "search": {"type": "http", "url": "https://mcp.example/search", "headers": {"Authorization": HEADER}},
        "off": {"command": "/usr/bin/never", "enabled": False},
    }
}
CALLERS = McpServer("mine", command="/opt/mine", env=(("MINE_KEY", MINE),))


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CONFIG))
    return str(path)


def received(record: Path, method: str) -> list[dict[str, Any]]:
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    return [m["params"] for m in sent if m.get("method") == method]


async def reply_to(session: Any, prompt: str) -> str:
    result = await session.run_turn(prompt)
    assert result.error is None, result.error
    return str(result.last_message)


@pytest.mark.both_backends
async def test_a_local_agent_receives_the_servers_and_lists_them_back(
    workspace: str, tmp_path: Path, config: str
) -> None:
    record = tmp_path / "record.jsonl"
    options = fast_options(
        scripted("--mcp", "http", "--record", str(record)), mcp_config=config, mcp_servers=(CALLERS,)
    )
    async with open_session(workspace, options) as session:
        said = await reply_to(session, "@mcp-servers done")
        assert session.capabilities.state(Capability.TOOL_SERVERS) is CapabilityState.PROTOCOL
    assert "mcp servers: mine(stdio:MINE_KEY),files(stdio:TOKEN+Z),search(http:Authorization)" in said
    (new,) = received(record, "session/new")
    expected = [render_server(CALLERS), *map(render_server, load_mcp_config(config))]
    assert new == {"cwd": workspace, "mcpServers": expected}
    assert new["mcpServers"][1]["env"] == [{"name": "TOKEN", "value": TOKEN}, {"name": "Z", "value": "zz-value"}]


async def test_http_servers_are_withheld_from_an_agent_that_cannot_take_them(
    workspace: str, tmp_path: Path, config: str, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "record.jsonl"
    with caplog.at_level(logging.WARNING, logger="remote_acp"):
        async with open_session(workspace, fast_options(scripted("--record", str(record)), mcp_config=config)) as s:
            assert s.capabilities.state(Capability.TOOL_SERVERS) is CapabilityState.GAP
            result = await s.run_turn("@mcp-servers")
    assert [m["name"] for m in received(record, "session/new")[0]["mcpServers"]] == ["files"]
    assert "mcp servers: files(stdio:TOKEN+Z)" in result.last_message
    assert (
        caplog.messages.count(
            "configured tool servers were not delivered: the agent does not advertise HTTP tool-server support"
        )
        == 1
    )


async def test_secrets_of_env_and_headers_never_reach_a_log_line(
    workspace: str, tmp_path: Path, config: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Everything logged at debug, with the agent echoing every secret back in a reply and in
    a session/new error: nothing carries a value, whole or cut."""
    options = fast_options(scripted("--mcp", "http,sse"), mcp_config=config, mcp_servers=(CALLERS,))
    with caplog.at_level(logging.DEBUG, logger="remote_acp"):
        async with open_session(workspace, options) as session:
            events: list[Any] = []
            result = await session.run_turn(f"{TOKEN} {HEADER} {MINE}", events.append)
        refused = fast_options(scripted("--new-error", f"-32001:bad {TOKEN} and {HEADER}"), mcp_config=config)
        with pytest.raises(RemoteAcpError) as info:
            async with open_session(workspace, refused):
                pass
    assert result.last_message == "*** *** ***"  # a header value is masked whole, "Bearer" with it
    assert "***" in str(info.value) and TOKEN not in str(info.value)
    logged = caplog.text + "".join(str(vars(r)) for r in caplog.records) + "".join(map(repr, events))
    assert "delivering tool servers" in caplog.text  # the debug records were captured
    for secret in (TOKEN, HEADER, MINE, "session-header"):
        assert secret not in logged


async def test_a_server_secret_on_the_agents_stderr_is_masked_in_the_start_error_and_the_log(
    workspace: str, config: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Tool servers are the agent's children and share its stderr: an agent that dies starting
    with a server's token on stderr leaves it neither in the error nor in the stderr log lines."""
    agent = scripted("--crash-at", "new", "--stderr", f"bad token {TOKEN} and {HEADER}")
    with caplog.at_level(logging.DEBUG, logger="remote_acp"), pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(agent, mcp_config=config)):
            pass
    said = str(info.value) + info.value.detail
    assert "bad token ***" in said
    assert any("agent stderr: bad token ***" in r.getMessage() for r in caplog.records)
    logged = said + caplog.text + "".join(str(vars(r)) for r in caplog.records)
    for secret in (TOKEN, HEADER, "session-header"):
        assert secret not in logged


async def test_a_broken_file_fails_before_the_agent_is_launched(workspace: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"mine": {"command": "/x", "env": {"K": "' + TOKEN + '"}}}}')
    cases = {
        str(tmp_path / "absent.json"): "cannot read",
        str(broken): "reserved by a tool server the caller supplies",
    }
    for path, expected in cases.items():
        options = fast_options(scripted("--pid-file", str(pid_file)), mcp_config=path, mcp_servers=(CALLERS,))
        with pytest.raises(RemoteAcpError) as info:
            async with open_session(workspace, options):
                pass
        assert info.value.kind is ErrorKind.RESPONSE_ERROR
        assert info.value.message.startswith("parse MCP config: ") and expected in info.value.message
        assert TOKEN not in str(info.value)
    assert not pid_file.exists()  # nothing was launched


@pytest.mark.parametrize(("advertise", "method"), [("load", "session/load"), ("resume", "session/resume")])
async def test_a_continued_session_gets_the_servers_again(
    workspace: str, tmp_path: Path, config: str, advertise: str, method: str
) -> None:
    state, record = tmp_path / "state", tmp_path / "record.jsonl"
    state.mkdir()
    agent = scripted("--advertise", advertise, "--state-dir", str(state), "--record", str(record))
    async with open_session(workspace, fast_options(agent)) as first:
        await reply_to(first, "hello")
        saved = first.session_id
    options = fast_options(agent, mcp_config=config)
    async with open_session(workspace, options, resume=saved, ledger=OriginLedger()) as second:
        assert second.info.obtained == ("loaded" if advertise == "load" else "resumed")
        said = await reply_to(second, "@mcp-servers")
    assert "mcp servers: files(stdio:TOKEN+Z)" in said
    (params,) = received(record, method)
    assert params["mcpServers"] == [render_server(load_mcp_config(config)[0])]
    assert received(record, "session/new")[0]["mcpServers"] == []  # the first run had none


async def test_a_resume_without_servers_omits_the_key_and_a_load_sends_an_empty_list(
    workspace: str, tmp_path: Path
) -> None:
    state, record = tmp_path / "state", tmp_path / "record.jsonl"
    state.mkdir()
    for advertise in ("resume", "load"):
        agent = scripted("--advertise", advertise, "--state-dir", str(state), "--record", str(record))
        async with open_session(workspace, fast_options(agent)) as first:
            await reply_to(first, "hello")
        async with open_session(workspace, fast_options(agent), resume=first.session_id, ledger=OriginLedger()):
            pass
    assert "mcpServers" not in received(record, "session/resume")[0]
    assert received(record, "session/load")[0]["mcpServers"] == []


async def test_a_credential_check_sends_no_servers_but_checks_the_file(
    workspace: str, tmp_path: Path, config: str
) -> None:
    record = tmp_path / "record.jsonl"
    options = fast_options(scripted("--mcp", "http", "--record", str(record)), mcp_config=config)
    await verify_credentials(workspace, options)
    assert received(record, "session/new")[0]["mcpServers"] == []
    with pytest.raises(RemoteAcpError, match="parse MCP config: cannot read"):
        await verify_credentials(workspace, fast_options(scripted(), mcp_config=str(tmp_path / "absent.json")))
