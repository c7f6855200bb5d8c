"""End-to-end checks of the scripted ACP agent, driven by a tiny synchronous stdlib client."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.processes import wait_for

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
Json = dict[str, Any]


class AgentProcess:
    """The agent as a subprocess, with line-level send/receive and a receive timeout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "remote_acp.testing.scripted_agent", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self._buffer = b""

    def send(self, message: Json) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, request_id: Any, method: str, params: Json) -> None:
        self.send({"id": request_id, "method": method, "params": params})

    def line(self, timeout: float = 5.0) -> bytes:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, remaining))
            if not ready:
                raise TimeoutError(f"no line from the agent within {timeout} s")
            data = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not data:
                raise EOFError("agent closed stdout")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def recv(self, timeout: float = 5.0) -> Json:
        message = json.loads(self.line(timeout))
        assert isinstance(message, dict)
        assert message["jsonrpc"] == "2.0"
        return message

    def until_response(self, request_id: Any) -> tuple[list[Json], Json]:
        """Messages received before the response to ``request_id``, and that response."""
        before: list[Json] = []
        while True:
            message = self.recv()
            if message.get("id") == request_id and "method" not in message:
                return before, message
            before.append(message)

    def open_session(self) -> str:
        self.request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert self.recv()["id"] == 0
        self.request("new", "session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = self.recv()["result"]["sessionId"]
        assert isinstance(session_id, str)
        return session_id

    def prompt(self, request_id: Any, session_id: str, text: str) -> None:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        self.request(request_id, "session/prompt", params)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def agent() -> Iterator[AgentProcess]:
    process = AgentProcess()
    try:
        yield process
    finally:
        process.close()


def chunk_texts(messages: list[Json]) -> list[str]:
    return [
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]


def test_handshake_and_chunked_reply(agent: AgentProcess) -> None:
    agent.request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    init = agent.recv()
    assert init["id"] == 0
    assert init["result"]["protocolVersion"] == 1
    assert init["result"]["agentInfo"]["name"] == "scripted-agent"
    agent.request("new", "session/new", {"cwd": "/tmp", "mcpServers": []})
    assert agent.recv() == {"jsonrpc": "2.0", "id": "new", "result": {"sessionId": "sess-1"}}

    agent.prompt("p-1", "sess-1", "@chunks=3 hello world")
    updates, response = agent.until_response("p-1")
    assert chunk_texts(updates) == ["hell", "o wo", "rld"]
    assert {m["params"]["update"]["messageId"] for m in updates} == {"msg-1"}
    assert response["result"] == {"stopReason": "end_turn"}


def test_session_new_rejects_relative_cwd(agent: AgentProcess) -> None:
    agent.request(1, "session/new", {"cwd": "relative", "mcpServers": []})
    assert agent.recv()["error"]["code"] == -32602
    agent.request(2, "no/such/method", {})
    assert agent.recv()["error"]["code"] == -32601


def test_permission_rejected(agent: AgentProcess) -> None:
    sid = agent.open_session()
    agent.prompt(7, sid, "@permission")
    request = agent.recv()
    assert request["method"] == "session/request_permission"
    assert request["id"] == 0
    options = {o["optionId"]: o["kind"] for o in request["params"]["options"]}
    assert options["reject"] == "reject_once"
    agent.send({"id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "reject"}}})
    updates, response = agent.until_response(7)
    assert chunk_texts(updates) == ["permission outcome: selected reject", "ok"]
    assert response["result"] == {"stopReason": "end_turn"}


def test_stop_reason_and_error(agent: AgentProcess) -> None:
    sid = agent.open_session()
    agent.prompt(1, sid, "@stop=refusal no")
    _, response = agent.until_response(1)
    assert response["result"] == {"stopReason": "refusal"}
    agent.prompt(2, sid, "@error=-32603")
    _, response = agent.until_response(2)
    assert response["error"] == {"code": -32603, "message": "scripted failure"}


def test_crash_at_initialize() -> None:
    process = AgentProcess("--crash-at", "initialize", "--exit-code", "7", "--stderr", "boom")
    try:
        process.request(0, "initialize", {"protocolVersion": 1})
        assert process.proc.wait(timeout=5) == 7
        assert process.proc.stderr is not None
        assert b"boom" in process.proc.stderr.read()
        assert process.proc.stdout is not None
        assert process.proc.stdout.read() == b""
    finally:
        process.close()


def test_bulk_chunks(agent: AgentProcess) -> None:
    sid = agent.open_session()
    agent.prompt(3, sid, "@bulk=1000")
    updates, response = agent.until_response(3)
    assert chunk_texts(updates) == ["x"] * 1000
    assert response["result"] == {"stopReason": "end_turn"}


def test_cancel_during_sleep(tmp_path: Path) -> None:
    record = tmp_path / "received.jsonl"
    agent = AgentProcess("--record", str(record))
    try:
        sid = agent.open_session()
        agent.prompt(4, sid, "@sleep=30 never said")  # the sleep is the turn being cancelled

        def prompt_received() -> bool:
            lines = record.read_text().splitlines() if record.exists() else []
            return any(json.loads(line).get("id") == 4 for line in lines)

        wait_for(prompt_received, "the agent to receive the prompt")  # its turn is asleep from then on
        started = time.monotonic()
        agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
        updates, response = agent.until_response(4)
        assert time.monotonic() - started < 2
        assert updates == []
        assert response["result"] == {"stopReason": "cancelled"}
    finally:
        agent.close()


def test_stdin_eof_exits_mid_turn(agent: AgentProcess) -> None:
    sid = agent.open_session()
    agent.prompt(5, sid, "@never")
    assert agent.proc.stdin is not None
    agent.proc.stdin.close()
    assert agent.proc.wait(timeout=5) == 0


def test_scripted_error_data_auth_methods_and_a_slow_method() -> None:
    login = {"id": "login", "name": "Log in", "description": "run `agent login`"}
    process = AgentProcess(
        "--error-data", '{"details": "exited"}', "--auth-method", json.dumps(login), "--answer-after", "new=0.3"
    )
    try:
        process.request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert process.recv()["result"]["authMethods"] == [login]
        started = time.monotonic()
        process.request(1, "session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = process.recv()["result"]["sessionId"]
        assert time.monotonic() - started >= 0.3  # it read nothing meanwhile
        process.prompt(2, sid, "@error=-32000")
        _, response = process.until_response(2)
        assert response["error"] == {
            "code": -32000,
            "message": "Authentication required: scripted credential refusal",
            "data": {"details": "exited"},
        }
    finally:
        process.close()
