"""The connection as JSON-RPC over a byte stream, driven with plain bytes (no process).

The agent's end is a pair of in-memory pipes: what the test pushes is the agent's stdout, what
the connection writes is collected as its stdin. With a prelude (ssh's ready marker), nothing
but its opening goes out before the launched side is ready, what came before the marker is never
parsed, the go-ahead goes first, and a refusal lets nothing else out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from remote_acp.errors import ErrorKind, RemoteAcpError
from remote_acp.session.connection import AgentConnection
from remote_acp.targets.process.agent import PipeClosed
from remote_acp.targets.ssh.ready_marker import ReadyMarker

if TYPE_CHECKING:
    from remote_acp.protocol.jsonrpc import MalformedLine, Request

pytestmark = pytest.mark.anyio

MARKER = b"remote-acp-ready-0f"


class BytePipes:
    """The agent's stdout fed by the test, its stdin kept."""

    def __init__(self) -> None:
        self.stdout_eof = anyio.Event()
        self.written = bytearray()
        self.wrote = anyio.Event()
        self.closed = False
        self._send, self._receive = anyio.create_memory_object_stream[bytes](16)

    async def push(self, data: bytes) -> None:
        await self._send.send(data)

    def end(self) -> None:
        self.closed = True
        self._send.close()

    def close(self) -> None:
        self.end()
        self._receive.close()

    async def read_stdout(self) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            return b""

    async def write_stdin(self, data: bytes) -> None:
        if self.closed:
            raise PipeClosed("stdin is closed")
        self.written += data
        self.wrote.set()

    async def written_to_end_with(self, tail: bytes) -> bytes:
        with anyio.fail_after(5):
            while not self.written.endswith(tail):
                self.wrote = anyio.Event()
                await self.wrote.wait()
        return bytes(self.written)


class Recorder:
    """A :class:`~remote_acp.session.connection.ConnectionHandler` that keeps what it is told."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.requests: list[Request] = []
        self.malformed: list[MalformedLine] = []
        self.lost = False

    def paused(self) -> bool:
        return False

    def on_resumed(self) -> None: ...
    def on_update(self, params: Any) -> None:
        self.updates.append(params)

    def on_notification(self, method: str, params: Any) -> None: ...
    def on_request(self, request: Request) -> None:
        self.requests.append(request)

    def on_malformed(self, malformed: MalformedLine) -> None:
        self.malformed.append(malformed)

    def on_oversized(self, excerpt: bytes) -> None: ...
    def on_write_failed(self) -> None: ...
    def on_write_started(self) -> None: ...
    def batch_started(self) -> None: ...
    def batch_done(self, nbytes: int) -> None: ...
    def on_lost(self) -> None:
        self.lost = True


async def test_requests_and_answers_over_plain_bytes() -> None:
    pipes, handler = BytePipes(), Recorder()
    conn = AgentConnection(pipes, handler, max_line_bytes=4096)
    async with anyio.create_task_group() as tg:
        conn.start(tg)
        try:
            call = conn.call("initialize", {"protocolVersion": 1})
            assert await pipes.written_to_end_with(b"\n") == (
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
            )
            await pipes.push(b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}\n{"jsonrpc":"2.0","method":"session/upd')
            await pipes.push(
                b'ate","params":{"n":1}}\n{"jsonrpc":"2.0","id":"a","method":"fs/x","params":{}}\nnot json\n'
            )
            with anyio.fail_after(5):
                await call.done.wait()
            pipes.end()
            with anyio.fail_after(5):
                await conn.lost.wait()
        finally:
            conn.stop()
            pipes.close()
    assert call.response is not None and call.response.result == {"ok": True}
    assert handler.updates == [{"n": 1}]
    assert [r.method for r in handler.requests] == ["fs/x"]
    assert len(handler.malformed) == 1 and handler.lost and pipes.stdout_eof.is_set()


async def test_a_prelude_speaks_first_and_hands_over_to_the_protocol() -> None:
    pipes, handler = BytePipes(), Recorder()
    prelude = ReadyMarker(opening=b"the script\n", marker=MARKER, reply=b"go\n")
    conn = AgentConnection(pipes, handler, max_line_bytes=4096, prelude=prelude)
    async with anyio.create_task_group() as tg:
        conn.start(tg)
        try:
            call = conn.call("initialize")  # queued before the launched side is ready: it waits
            assert await pipes.written_to_end_with(b"the script\n") == b"the script\n"
            await pipes.push(b'Welcome\n{"jsonrpc":"2.0","method":"session/update","params":{"motd":1}}\nremote-acp-re')
            await anyio.sleep(0.05)
            assert pipes.written == b"the script\n" and not conn.ready.is_set()
            await pipes.push(b'ady-0f\n{"jsonrpc":"2.0","id":1,"result":{}}\n')
            with anyio.fail_after(5):
                await call.done.wait()
            written = await pipes.written_to_end_with(b'"method":"initialize"}\n')
            pipes.end()
        finally:
            conn.stop()
            pipes.close()
    assert written.startswith(b"the script\ngo\n{")
    assert call.response is not None and call.response.result == {}
    assert handler.updates == [] and handler.malformed == []  # the login's noise was never parsed
    assert conn.pre_ready_output.endswith(b'"params":{"motd":1}}\n')
    assert conn.bytes_received > 0 and conn.refusal is None


async def test_a_refused_go_ahead_lets_nothing_out_and_nothing_in() -> None:
    pipes, handler = BytePipes(), Recorder()
    refusal = RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "no agent here")
    seen: list[bytes] = []

    def gate(printed: bytes) -> RemoteAcpError | None:
        seen.append(printed)
        return refusal

    prelude = ReadyMarker(opening=b"script\n", marker=MARKER, reply=b"go\n", gate=gate)
    conn = AgentConnection(pipes, handler, max_line_bytes=4096, prelude=prelude)
    async with anyio.create_task_group() as tg:
        conn.start(tg)
        try:
            call = conn.call("initialize")
            await pipes.push(b"report: agent=missing\n" + MARKER + b'\n{"jsonrpc":"2.0","method":"session/update"}\n')
            with anyio.fail_after(5):
                await conn.wait_ready()
                await call.ticket.done.wait()
            pipes.end()
            with anyio.fail_after(5):
                await conn.lost.wait()
        finally:
            conn.stop()
            pipes.close()
    assert conn.refusal is refusal and not conn.ready.is_set()
    assert seen == [b"report: agent=missing\n"]
    assert call.ticket.failed and pipes.written == b"script\n"
    assert handler.updates == [] and handler.malformed == []
