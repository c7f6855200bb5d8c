"""Stopping an agent: one fixed order, whatever state the session reached.

The order is the behaviour contract's: answer the requests the agent still holds open, end the
session through the protocol when the handshake advertised a way to, SIGTERM the process group,
close stdin, wait for the exit within the graceful window, SIGKILL the group as a backstop,
close stdout and the connection, collect stderr and reap, and release the pipes last.

``stop_grace_ms`` is one window that starts when teardown starts: the answers may use half of
what remains, the protocol close half of what remains after that, so neither can eat the
signal that follows. Every step is bounded even when the agent stopped reading, and the whole
sequence is shielded from cancellation, so a cancelled caller still reaps its child.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ..protocol.jsonrpc import METHOD_NOT_FOUND
from ..protocol.unattended import CANCELLED_OUTCOME

if TYPE_CHECKING:
    from ..logs import ContextLogger
    from ..targets.process import AgentProcess
    from .connection import AgentConnection

__all__ = ["ProtocolClose", "stop_agent"]

_EOF_GLANCE_S = 0.2  # how long a cooperative agent's pipes get to reach end of stream


@dataclass(frozen=True, slots=True)
class ProtocolClose:
    """How to end the session through the protocol: ``session/close`` or ``session/delete``."""

    method: str
    session_id: str


async def stop_agent(
    conn: AgentConnection,
    process: AgentProcess,
    *,
    grace_s: float,
    drain_s: float,
    close: ProtocolClose | None,
    log: ContextLogger,
) -> None:
    """Run the fixed teardown order; bounded by ``grace_s`` plus twice ``drain_s``."""
    with anyio.CancelScope(shield=True):
        deadline = time.monotonic() + grace_s

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        # 1. answer every request the agent still holds open
        for request_id, method in list(conn.peer.open_incoming.items()):
            if method == "session/request_permission":
                conn.answer(request_id, CANCELLED_OUTCOME)
            else:
                conn.answer_error(request_id, METHOD_NOT_FOUND, "method not found")
        with anyio.move_on_after(remaining() / 2):
            await conn.flush()
        # 2. end the session through the protocol, when advertised
        if close is not None and not conn.lost.is_set():
            await _close_through_protocol(conn, close, remaining() / 2, log)
        conn.begin_close()
        # 3. SIGTERM to the group (and to descendants that left it), 4. close stdin
        process.remember_descendants()
        process.signal_group(signal.SIGTERM)
        process.close_stdin()
        # 5. wait for the exit within what is left of the window
        with anyio.move_on_after(remaining()):
            await process.exited.wait()
        if not process.exited.is_set():
            log.warning(
                "agent did not exit inside the graceful period and was force-terminated",
                extra={"grace_ms": round(grace_s * 1000)},
            )
        # 6. SIGKILL the group unconditionally, as a backstop
        process.signal_group(signal.SIGKILL)
        # 7. close stdout and the connection; whoever still holds our pipes is killed too
        with anyio.move_on_after(_EOF_GLANCE_S):
            await process.stderr_eof.wait()
            await process.stdout_eof.wait()
        if conn.output_abandoned or not (process.stderr_eof.is_set() and process.stdout_eof.is_set()):
            process.kill_pipe_holders()
        process.close_stdout()
        # 8. collect stderr and reap
        with anyio.move_on_after(drain_s):
            await process.stderr_eof.wait()
        with anyio.move_on_after(drain_s):
            await process.exited.wait()
        process.reap()
        # 9. release the pipes last
        conn.stop()
        process.release()


async def _close_through_protocol(
    conn: AgentConnection, close: ProtocolClose, bound: float, log: ContextLogger
) -> None:
    method = close.method
    # A failed delete leaves the conversation stored on the runtime's side: worth a warning.
    # A failed close only means a process that is going away anyway notices a little later.
    failure_level = log.warning if method == "session/delete" else log.debug
    call = conn.call(method, {"sessionId": close.session_id})
    with anyio.move_on_after(bound):
        await call.done.wait()
    if not call.done.is_set():
        conn.abandon(call)
        log.warning("%s did not complete before the wait ended", method, extra={"bound_s": round(bound, 3)})
    elif call.response is None:
        failure_level("%s call did not complete: the connection ended", method)
    elif call.response.error is not None:
        log.warning("%s returned an error", method, extra={"code": call.response.error.code})
    else:
        log.debug("session ended through the protocol", extra={"method": method})
