"""qwen-code given a stdio tool server on session/new starts it with the env we rendered and
speaks MCP to it (initialize, tools/list).

Not covered: the model calling the server's tool. qwen-code defers MCP tools behind its
``tool_search``/``tool_call`` tools, and in this pinned release the probe's tool did not appear
in any request the mock model received (neither declared nor in a deferred-tools reminder)
within a session's first turns, so a tool call cannot be scripted from the mock yet."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integration.qwen_fixtures import qwen_options, qwen_target
from remote_acp import open_session
from remote_acp.mcp import McpServer
from tests.support.agents import wait_until

if TYPE_CHECKING:
    from tests.support.openai_mock import OpenAIMock

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]

SERVER = Path(__file__).resolve().parents[1] / "tests" / "agents" / "mcp_probe_server.py"
MARKER = "probe-marker-31415"


def methods(record: Path) -> list[str | None]:
    if not record.exists():
        return []
    return [json.loads(line)["method"] for line in record.read_text().splitlines()]


async def test_qwen_starts_a_stdio_server_it_is_given(workspace: str, tmp_path: Path, mock: OpenAIMock) -> None:
    record = tmp_path / "mcp-record.jsonl"
    server = McpServer(
        "probe", command=sys.executable, args=(str(SERVER), str(record)), env=(("PROBE_MARKER", MARKER),)
    )
    options = qwen_options(mcp_servers=(server,))
    async with open_session(workspace, options, qwen_target(tmp_path / "home", mock)) as session:
        await wait_until(lambda: "tools/list" in methods(record), within=30)
        result = await session.run_turn("hello")
        assert result.error is None, result.error
    first = json.loads(record.read_text().splitlines()[0])
    assert first == {"method": None, "marker": MARKER}  # started with the env we rendered
    assert methods(record)[1:3] == ["initialize", "notifications/initialized"]
