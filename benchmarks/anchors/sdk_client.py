"""Anchor: an ACP client written on the official Python SDK (``agent-client-protocol``, ``acp``).

    python sdk_client.py run|stats PROMPT AGENT_ARGV...

It does what ``remote-acp run`` does for one prompt, the way the SDK documents it:
``acp.spawn_agent_process`` with an ``acp.Client`` subclass, ``initialize``, ``new_session``,
one ``prompt``, then the context manager's teardown (close stdin, wait for the exit).

``run`` prints the reply text. ``stats`` prints one JSON object: ``import_s`` (``import acp``),
``start_s`` (spawn, initialize, session/new), ``turn_s`` (the prompt call, which returns once
every update before its answer was handled), ``teardown_s``, ``chunks``, and ``rss_kib`` /
``hwm_kib`` of this process read while it holds the session after the turn.
Exit status 0 when the turn ended with ``end_turn``.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any, cast  # noqa: E402

import acp  # noqa: E402
from acp.schema import (  # noqa: E402
    AgentMessageChunk,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
)

IMPORT_S = time.perf_counter() - _T0


def rss() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[2:5].lower() + "_kib"] = int(line.split()[1])
    return out


class CountingClient:
    """Collects message chunks; refuses permissions (none are asked in these benchmarks).

    The SDK looks handlers up by name and answers method-not-found for the ones a client lacks,
    so only the two this session can meet are written.
    """

    def __init__(self, keep_text: bool) -> None:
        self.chunks = 0
        self.keep_text = keep_text
        self.parts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            self.chunks += 1
            if self.keep_text and isinstance(update.content, TextContentBlock):
                self.parts.append(update.content.text)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


async def session(mode: str, prompt: str, agent: list[str]) -> int:
    client = CountingClient(keep_text=mode == "run")
    t0 = time.perf_counter()
    spawn = acp.spawn_agent_process(cast("acp.Client", client), agent[0], *agent[1:], env=dict(os.environ))
    async with spawn as (conn, _proc):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        new = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        t1 = time.perf_counter()
        response = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block(prompt)])
        t2 = time.perf_counter()
        memory = rss()
    t3 = time.perf_counter()
    if mode == "run":
        sys.stdout.write("".join(client.parts) + "\n")
    else:
        stats = {
            "import_s": IMPORT_S,
            "start_s": t1 - t0,
            "turn_s": t2 - t1,
            "teardown_s": t3 - t2,
            "chunks": client.chunks,
            **memory,
        }
        sys.stdout.write(json.dumps(stats) + "\n")
    return 0 if response.stop_reason == "end_turn" else 1


def main() -> int:
    mode, prompt, agent = sys.argv[1], sys.argv[2], sys.argv[3:]
    return asyncio.run(session(mode, prompt, agent))


if __name__ == "__main__":
    sys.exit(main())
