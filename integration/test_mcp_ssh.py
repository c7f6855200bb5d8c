"""Tool servers are never delivered over ssh: a remote launch reads no MCP file and sends
``mcpServers: []`` to a real agent behind a real sshd; no server value is on the ssh command line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from remote_acp import open_session
from remote_acp.mcp import McpServer
from remote_acp.session.capabilities import Capability, CapabilityState
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.processes import cmdline

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

SECRET = "remote-mcp-secret-7c6b5a"


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


async def test_a_remote_launch_reads_no_file_and_sends_no_servers(
    ssh_lab: SshLab, workspace: str, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    absent = tmp_path / "absent.json"  # a local launch fails reading it; a remote one never opens it
    options = fast_options(
        scripted("--mcp", "http,sse", "--record", str(record)),
        read_timeout_ms=5_000,
        initialize_floor_ms=15_000,
        mcp_config=str(absent),
        mcp_servers=(McpServer("mine", command="/opt/mine", env=(("KEY", SECRET),)),),
    )
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config)))
    async with open_session(workspace, options, target=target) as session:
        assert session.pid is not None
        ssh_argv = cmdline(session.pid)
        result = await session.run_turn("@mcp-servers")
        assert session.capabilities.state(Capability.TOOL_SERVERS) is CapabilityState.GAP
    assert result.last_message == "mcp servers: none"
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    (new,) = [m["params"] for m in sent if m.get("method") == "session/new"]
    assert new == {"cwd": workspace, "mcpServers": []}
    assert SECRET.encode() not in ssh_argv and b"/opt/mine" not in ssh_argv
    assert SECRET not in record.read_text()
