"""The byte-level connection to one agent: JSON-RPC over its stdout and stdin.

Theory of operation: a reader task pulls stdout in reads of at most 64 KiB, frames lines,
classifies each with the JSON-RPC peer and dispatches it synchronously to a
:class:`ConnectionHandler` (the session), then calls ``batch_done`` once per read so waiters wake
once per batch, not once per chunk. After every read the reader yields to the event loop, so an
agent that floods cannot starve the other tasks of the process.

Both directions push back instead of growing. The reader stops reading while the handler says
its caller is behind (:meth:`ConnectionHandler.paused`) or while more than
:data:`WRITE_HIGH_WATER` bytes wait to be written to the agent (an agent that does not read its
stdin gets no further answers queued for it); the agent then blocks on its own full stdout pipe.
A writer task owns stdin: everything we send is queued and written in order, so the reader never
blocks on a write. :attr:`AgentConnection.writing_since` tells how long the write in progress has
waited for the agent, so the session can call an agent that stopped reading a failure on time.
Callers that must know a write happened wait on its :class:`WriteTicket`, always under a bound.

The connection needs only :class:`AgentPipes` (a byte stream), so it can be driven with plain
bytes. What comes before the protocol is the launch target's (:class:`~remote_acp.targets.launch.Prelude`,
such as ssh's ready marker): the connection writes the prelude's opening and nothing else, feeds
it what arrives until it says ready (or refuses), writes its reply first, and from then on it is
JSON-RPC. The agent process's own tasks (its stderr, its exit, the release of its output) run
beside the connection's (:func:`~remote_acp.session.agent_watch.watch_agent`): after the agent
exits, a descendant may still hold stdout open; the release task gives it ``output_drain_ms``,
then closes stdout itself, which ends the reader, and the loss is reported with its own message.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import anyio.lowlevel

from ..logs import get_logger
from ..protocol.framing import OVERSIZED, FrameItem, LineFramer
from ..protocol.jsonrpc import (
    JsonObject,
    JsonRpcPeer,
    MalformedLine,
    Request,
    RequestId,
    Response,
    RpcNotification,
    StrayResponse,
)
from ..targets.launch import Ready
from ..targets.process.agent import PipeClosed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..errors import RemoteAcpError
    from ..targets.launch import Prelude, PreludeState

__all__ = [
    "MAX_QUEUED_BYTES",
    "WRITE_HIGH_WATER",
    "AgentConnection",
    "AgentPipes",
    "ConnectionHandler",
    "PendingCall",
    "WriteTicket",
]

log = get_logger("remote_acp.session.connection")

OUTPUT_ABANDONED = "the agent runtime exited before the session finished collecting its output"
STREAM_ENDED = "the agent's connection ended before a response arrived"


WRITE_HIGH_WATER: Final = 1024 * 1024
"""Bytes queued for the agent's stdin above which the reader stops reading the agent."""
MAX_QUEUED_BYTES: Final = 16 * 1024 * 1024
"""Bytes queued for the agent's stdin above which writing counts as failed (a last resort: the
reader has stopped long before, so only our own requests can still add to the queue)."""


class AgentPipes(Protocol):
    """The agent's end of the connection (an :class:`~remote_acp.targets.agent_end.AgentEnd`)."""

    @property
    def stdout_eof(self) -> anyio.Event:
        """Set by the connection's reader once stdout ended."""
        ...

    async def read_stdout(self) -> bytes:
        """The next bytes, at most 64 KiB; ``b""`` at end of stream."""
        ...

    async def write_stdin(self, data: bytes) -> None:
        """Write all of ``data``. :raises PipeClosed: when the agent's stdin is gone."""
        ...


class ConnectionHandler(Protocol):
    """What the connection calls, from its reader task, for each incoming message."""

    def paused(self) -> bool:
        """Whether the reader must wait before reading more (the caller is behind)."""
        ...

    def on_resumed(self) -> None: ...
    def on_update(self, params: Any) -> None: ...
    def on_notification(self, method: str, params: Any) -> None: ...
    def on_request(self, request: Request) -> None: ...
    def on_malformed(self, malformed: MalformedLine) -> None: ...
    def on_oversized(self, excerpt: bytes) -> None: ...
    def on_write_failed(self) -> None: ...
    def on_write_started(self) -> None:
        """A write began (it may wait for the agent: see :attr:`AgentConnection.writing_since`)."""
        ...

    def batch_started(self) -> None:
        """A read is about to be dispatched."""
        ...

    def batch_done(self, nbytes: int) -> None: ...
    def on_lost(self) -> None: ...


class WriteTicket:
    """Completion of one queued write: ``done`` is set when it was written or failed."""

    __slots__ = ("data", "done", "failed", "started")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.done = anyio.Event()
        self.failed = False
        self.started = False
        """The writer began writing it: it can no longer be taken back."""


class PendingCall:
    """One request of ours awaiting its answer; ``done`` is set on answer or connection loss.

    ``on_done``, when set, is called from the reader at that moment (before any waiter runs),
    so a decision that depends on the answer is taken where the answer arrived.
    """

    __slots__ = ("done", "id", "method", "on_done", "response", "ticket", "unreadable")

    def __init__(self, request_id: int, method: str, ticket: WriteTicket) -> None:
        self.id = request_id
        self.method = method
        self.ticket = ticket
        self.response: Response | None = None
        self.done = anyio.Event()
        self.on_done: Callable[[], None] | None = None
        self.unreadable: str | None = None
        """Why the line that answered it could not be read (then ``response`` is ``None``)."""

    def _resolve(self, response: Response | None) -> None:
        self.response = response
        self.done.set()
        if self.on_done is not None:
            self.on_done()


class AgentConnection:
    def __init__(
        self,
        pipes: AgentPipes,
        handler: ConnectionHandler,
        *,
        max_line_bytes: int,
        prelude: Prelude | None = None,
        first_request_id: int = 1,
    ) -> None:
        self.pipes = pipes
        self.peer = JsonRpcPeer(first_request_id)
        self._handler = handler
        self._framer = LineFramer(max_line_bytes)
        self._queue: deque[WriteTicket] = deque()
        self._queue_ready = anyio.Event()
        self._pending: dict[RequestId, PendingCall] = {}
        self._queued_bytes = 0
        self.lost = anyio.Event()
        self.output_abandoned = False
        self.write_failed = False
        self.bytes_received = 0
        self.writing_since: float | None = None
        """When the write in progress began, while it waits for the agent to read (else None)."""
        self._resume = anyio.Event()
        self._reader_paused = False
        self._closing = False
        self._scopes: list[anyio.CancelScope] = []
        self.prelude = prelude
        self.ready = anyio.Event()
        """Set once the launched side got through its prelude (at once without one)."""
        self._ready_or_lost = anyio.Event()
        self._prelude_state: PreludeState | None = None
        self.refusal: RemoteAcpError | None = None
        """Why the prelude refused the launched side (then :attr:`ready` is never set)."""
        self._opening: WriteTicket | None = None
        if prelude is None:
            self.ready.set()
            self._ready_or_lost.set()
        else:
            self._prelude_state = prelude.begin()
            if prelude.opening:
                self._opening = WriteTicket(prelude.opening)
                self._enqueue(self._opening)

    @property
    def pre_ready_output(self) -> bytes:
        """What the launched side printed before it was ready (its last bytes, bounded)."""
        return self._prelude_state.printed if self._prelude_state is not None else b""

    def start(self, tg: anyio.abc.TaskGroup, *beside: tuple[Callable[[], Awaitable[None]], str]) -> None:
        """Start the connection's tasks in ``tg``, and the ``beside`` ones (function, name) with
        them (see :func:`~remote_acp.session.agent_watch.watch_agent`).

        They are shielded from outside cancellation: a caller cancelled mid-session still gets
        a teardown that sees the agent exit and its pipes drain. :meth:`stop` ends them.
        """
        for fn, name in ((self._read_loop, "reader"), (self._write_loop, "writer"), *beside):
            tg.start_soon(self._shielded, fn, name=f"remote-acp {name}")

    async def _shielded(self, fn: Callable[[], Awaitable[None]]) -> None:
        with anyio.CancelScope(shield=True) as scope:
            self._scopes.append(scope)
            await fn()

    def stop(self) -> None:
        """End the connection's tasks (the last step of teardown)."""
        self._closing = True
        self.resume_reading()
        for scope in self._scopes:
            scope.cancel()

    @property
    def closing(self) -> bool:
        """Teardown began: losses and write failures are expected from here on."""
        return self._closing

    @property
    def loss_message(self) -> str:
        return OUTPUT_ABANDONED if self.output_abandoned else STREAM_ENDED

    # -- sending ------------------------------------------------------------------------------

    def send(self, data: bytes) -> WriteTicket:
        """Queue ``data`` for stdin; never blocks."""
        ticket = WriteTicket(data)
        if self._queued_bytes + len(data) > MAX_QUEUED_BYTES and not self.write_failed and not self._closing:
            log.warning("the agent stopped reading its input", extra={"queued_bytes": self._queued_bytes})
            self._fail_writes()
        if self.write_failed or self._closing:
            ticket.failed = True
            ticket.done.set()
            return ticket
        self._enqueue(ticket)
        return ticket

    def _enqueue(self, ticket: WriteTicket) -> None:
        self._queue.append(ticket)
        self._queued_bytes += len(ticket.data)
        self._queue_ready.set()

    def _fail_writes(self) -> None:
        self.write_failed = True
        if not self._closing:
            self._handler.on_write_failed()
            self._handler.batch_done(0)
        self.resume_reading()

    def give_up_writing(self) -> None:
        """The agent stopped reading: fail every write from now on (the session calls this once
        its bound for a stuck write passed)."""
        if not self.write_failed:
            self._fail_writes()

    def call(self, method: str, params: JsonObject | None = None) -> PendingCall:
        """Send a request; the answer arrives on the returned :class:`PendingCall`."""
        request_id, line = self.peer.request(method, params)
        call = PendingCall(request_id, method, self.send(line))
        if self.lost.is_set():
            call.done.set()
        else:
            self._pending[request_id] = call
        return call

    def adopt(self, request_id: int, method: str) -> PendingCall:
        """Await the answer to a request an earlier controller of this stream sent (a session
        taken over mid-turn); nothing is written."""
        ticket = WriteTicket(b"")
        ticket.started = True
        ticket.done.set()
        call = PendingCall(request_id, method, ticket)
        self.peer.adopt(request_id, method)
        if self.lost.is_set():
            call.done.set()
        else:
            self._pending[request_id] = call
        return call

    def abandon(self, call: PendingCall) -> None:
        """Stop waiting for ``call``; a late answer is then logged as stray and ignored."""
        self._pending.pop(call.id, None)
        self.peer.forget(call.id)

    def retract(self, ticket: WriteTicket) -> bool:
        """Take back a queued write the writer has not begun; ``False`` when it is too late."""
        if ticket.started or ticket not in self._queue:
            return ticket.failed and ticket.done.is_set()
        self._queue.remove(ticket)
        self._queued_bytes -= len(ticket.data)
        ticket.failed = True
        ticket.done.set()
        return True

    def notify(self, method: str, params: JsonObject | None = None) -> WriteTicket:
        return self.send(self.peer.notify(method, params))

    def answer(self, request_id: RequestId, result: Any) -> WriteTicket:
        return self.send(self.peer.respond(request_id, result))

    def answer_error(self, request_id: RequestId, code: int, message: str) -> WriteTicket:
        return self.send(self.peer.respond_error(request_id, code, message))

    async def flush(self) -> None:
        """Wait until everything queued so far was written (or failed). Callers bound it."""
        if self._queue:
            await self._queue[-1].done.wait()

    async def _write_loop(self) -> None:
        while True:
            if not self._queue:
                self._queue_ready = anyio.Event()
                await self._queue_ready.wait()
                continue
            ticket = self._queue[0]
            if not self.ready.is_set() and ticket is not self._opening:
                # Nothing but the prelude's opening goes out before the launched side is ready.
                await self._ready_or_lost.wait()
                if self.ready.is_set():
                    continue  # the prelude's reply now goes first
                self.write_failed = True  # refused, or lost before it was ready: nothing will be read
            ticket.started = True
            if not self.write_failed:
                self.writing_since = time.monotonic()
                self._handler.on_write_started()
                try:
                    await self.pipes.write_stdin(ticket.data)
                except PipeClosed as exc:
                    if not self._closing and not self.write_failed:
                        log.warning("a write to the agent failed", extra={"reason": str(exc)})
                    self._fail_writes()
                finally:
                    self.writing_since = None
            ticket.failed = self.write_failed
            self._queue.popleft()
            self._queued_bytes -= len(ticket.data)
            ticket.done.set()
            if self._reader_paused and self._queued_bytes <= WRITE_HIGH_WATER:
                self.resume_reading()

    # -- receiving ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        pipes, framer, handler = self.pipes, self._framer, self._handler
        checkpoint = anyio.lowlevel.checkpoint
        while True:
            data = await pipes.read_stdout()
            if not data:
                break
            self.bytes_received += len(data)
            if not self.ready.is_set():
                data = self._through_prelude(data)
                if not data:
                    await checkpoint()
                    continue
            handler.batch_started()
            self._dispatch(framer.feed(data))
            handler.batch_done(len(data))
            if handler.paused() or self._backlogged():
                await self._wait_for_room()
            else:
                await checkpoint()  # a read that did not wait must not keep the loop to itself
        self._dispatch(framer.end())  # an unterminated last line is still a line
        pipes.stdout_eof.set()
        self._mark_lost()

    def _through_prelude(self, data: bytes) -> bytes:
        """Feed the prelude; return the protocol bytes that followed its end, else nothing."""
        state = self._prelude_state
        if state is None or self.refusal is not None:
            # Refused: the launched side reads the end of its input at teardown and starts
            # nothing. Nothing queued goes out (the writer fails it), nothing after is protocol.
            return b""
        step = state.feed(data)
        if step is None:
            return b""
        if not isinstance(step, Ready):
            self.refusal = step
            self._ready_or_lost.set()
            return b""
        if step.reply:
            # The reply goes first, after the opening if that is still being written.
            reply = WriteTicket(step.reply)
            self._queue.insert(1 if self._queue and self._queue[0] is self._opening else 0, reply)
            self._queued_bytes += len(reply.data)
            self._queue_ready.set()
        self.ready.set()
        self._ready_or_lost.set()
        return step.rest

    async def wait_ready(self) -> None:
        """Wait until the launched side is ready for the protocol, refused, or the connection ended."""
        await self._ready_or_lost.wait()

    def _backlogged(self) -> bool:
        return self._queued_bytes > WRITE_HIGH_WATER and not self.write_failed

    async def _wait_for_room(self) -> None:
        self._reader_paused = True
        try:
            while not self._closing and (self._handler.paused() or self._backlogged()):
                self._resume = anyio.Event()
                await self._resume.wait()
        finally:
            self._reader_paused = False
        self._handler.on_resumed()

    @property
    def reader_paused(self) -> bool:
        return self._reader_paused

    def resume_reading(self) -> None:
        """Let a paused reader check again whether it may read (cheap when it is not paused)."""
        if self._reader_paused:
            self._resume.set()

    def _dispatch(self, frames: list[FrameItem]) -> None:
        """Hand each frame of one read to the handler (the hot path: no awaits, no allocation
        beyond the parse)."""
        framer, peer, handler, pending = self._framer, self.peer, self._handler, self._pending
        for frame in frames:
            if frame is OVERSIZED:
                log.warning(
                    "a line from the agent exceeded the connection's line bound",
                    extra={"max_line_bytes": framer.max_line_bytes},
                )
                handler.on_oversized(framer.oversized_head)
                continue
            message = peer.receive(frame)
            if isinstance(message, RpcNotification):
                if message.method == "session/update":
                    handler.on_update(message.params)
                else:
                    handler.on_notification(message.method, message.params)
            elif isinstance(message, Response):
                call = pending.pop(message.id, None)
                if call is not None:
                    call._resolve(message)
            elif isinstance(message, Request):
                handler.on_request(message)
            elif isinstance(message, StrayResponse):
                log.debug("response to no pending request", extra={"response_id": repr(message.id)[:100]})
            else:
                if message.reply_to is not None and (call := pending.pop(message.reply_to, None)) is not None:
                    # It names a request of ours and cannot be read: most likely its answer.
                    call.unreadable = message.reason
                    call._resolve(None)
                handler.on_malformed(message)

    def _mark_lost(self) -> None:
        if self.lost.is_set():
            return
        self.lost.set()
        self._ready_or_lost.set()
        calls = list(self._pending.values())
        self._pending.clear()
        for call in calls:
            call._resolve(None)
        if not self._closing:
            self._handler.on_lost()
            self._handler.batch_done(0)

    def begin_close(self) -> None:
        """Teardown started: losses and write failures are expected from here on, and the reader
        no longer waits for room (what it reads now only has to be drained)."""
        self._closing = True
        self.resume_reading()
