"""Stopping an agent: one fixed order, whatever state the session reached.

The order is the behaviour contract's: end the session through the protocol when the handshake
advertised a way to, SIGTERM the agent's tree, close stdin, wait for the exit within the
graceful window, SIGKILL the tree as a backstop, close stdout and the connection, collect
stderr and reap, and release the pipes last. (The contract's first step, answering the requests
the agent still holds open, has nothing to do here: every agent request is answered the moment
it is read, and one that was never read is not open for us.)

``stop_grace_ms`` is one window that starts when teardown starts: the protocol close may use
half of it, so it cannot eat the signal that follows. After the SIGKILL every wait is bounded by
:data:`AFTER_KILL_S` in all, so teardown takes at most ``stop_grace_ms`` plus about a second. It
is shielded from cancellation, so a cancelled caller still reaps its child, and its last steps
run even when an earlier one raised, so the connection's tasks always end.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import anyio
import anyio.lowlevel

from ..errors import Cause, ErrorKind, RemoteAcpError

if TYPE_CHECKING:
    from ..logs import ContextLogger
    from ..targets.agent_end import AgentEnd
    from .connection import AgentConnection

__all__ = ["AFTER_KILL_S", "ProtocolClose", "stop_agent", "stop_started_after_close"]

AFTER_KILL_S: Final = 1.0
"""How long, after the SIGKILL, the pipes may take to reach end of stream and the process to be
reaped (whoever still holds a pipe is killed too)."""
_EOF_GLANCE_S: Final = 0.2  # how long a killed agent's pipes get before their holders are hunted


@dataclass(frozen=True, slots=True)
class ProtocolClose:
    """How to end the session through the protocol: ``session/close`` or ``session/delete``."""

    method: str
    session_id: str


async def stop_agent(
    conn: AgentConnection,
    process: AgentEnd,
    *,
    grace_s: float,
    drain_s: float,
    close: ProtocolClose | None,
    log: ContextLogger,
) -> None:
    """Run the fixed teardown order; bounded by ``grace_s`` plus :data:`AFTER_KILL_S`."""
    with anyio.CancelScope(shield=True):
        try:
            await _stop(conn, process, grace_s=grace_s, drain_s=drain_s, close=close, log=log)
        finally:
            # Whatever happened above, the agent's group is killed, the connection's tasks end
            # and the descriptors close (a step that raised must not leave a live agent behind).
            if not process.exited.is_set():
                process.signal_group(signal.SIGKILL)
            conn.stop()
            process.reap()
            process.release()


async def _stop(
    conn: AgentConnection,
    process: AgentEnd,
    *,
    grace_s: float,
    drain_s: float,
    close: ProtocolClose | None,
    log: ContextLogger,
) -> None:
    deadline = time.monotonic() + grace_s

    def remaining() -> float:
        return max(0.0, deadline - time.monotonic())

    # 1. end the session through the protocol, when advertised
    if close is not None and not conn.lost.is_set() and grace_s > 0:
        await _close_through_protocol(conn, close, remaining() / 2, log)
    conn.begin_close()
    # 2. SIGTERM to the agent's tree, 3. close stdin
    if grace_s > 0:
        await process.terminate()
    process.close_stdin()
    # 4. wait for the exit within what is left of the window
    with anyio.move_on_after(remaining()):
        await process.exited.wait()
    if not process.exited.is_set() and grace_s > 0:
        log.warning(
            "agent did not exit inside the graceful period and was force-terminated",
            extra={"grace_ms": round(grace_s * 1000)},
        )
    # 5. SIGKILL the tree unconditionally, as a backstop, until nothing of it is left
    after_kill = time.monotonic() + AFTER_KILL_S
    await process.kill(bound_s=AFTER_KILL_S / 2)
    # 6. close stdout and the connection; whoever still holds our pipes is killed too
    with anyio.move_on_after(_EOF_GLANCE_S):
        await process.stderr_eof.wait()
        await process.stdout_eof.wait()
    if conn.output_abandoned or not (process.stderr_eof.is_set() and process.stdout_eof.is_set()):
        await process.kill_pipe_holders_off_loop()
    process.close_stdout()
    # 7. collect stderr and reap (8., releasing the pipes, follows in stop_agent)
    with anyio.move_on_after(min(drain_s, max(0.0, after_kill - time.monotonic()))):
        await process.stderr_eof.wait()
        await process.exited.wait()


async def stop_started_after_close(process: AgentEnd) -> None:
    """Stop an agent whose start ended after its session was closed, and say so.

    A start is shielded (a started agent must reach a teardown), so a session closed meanwhile
    (its caller cancelled, or ``aclose`` from another task) has already run its teardown with no
    agent to stop, and no other will come: the agent's tree is killed here, with no connection
    to it yet. A cancelled caller then gets its cancellation; any other gets the error.

    :raises RemoteAcpError: ``port_exit``, cause ``cancelled``.
    """
    with anyio.CancelScope(shield=True):
        await process.kill(bound_s=AFTER_KILL_S)
        process.close_stdout()
        process.reap()
        process.release()
    await anyio.lowlevel.checkpoint()
    raise RemoteAcpError(
        ErrorKind.PORT_EXIT, "the session was closed while its agent was starting", cause=Cause.CANCELLED
    )


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
