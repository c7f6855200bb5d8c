"""Taking a detached session over: start-up for a session that already runs on its host.

The agent was started, initialized and given its ACP session by an earlier controller; what the
handle (:class:`~remote_acp.session.handle.SessionHandle`) says of it stands in for the handshake.
The first connection runs the attach login instead of the session script; once the relay
answers, the host replays what the earlier controller had not acknowledged, from a whole line,
and then the live stream. This controller's request ids start where no earlier controller's can
be (:func:`first_request_id`), so an answer to the prompt that was in flight is told from ours
and can end the turn taken over (:meth:`remote_acp.Session.resume_turn`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc

from ..errors import Cause, ErrorKind, RemoteAcpError
from ..measure import Measurement
from .agent_watch import watch_agent
from .capabilities import Capability, CapabilityRecord
from .connection import AgentConnection
from .handshake import Handshake
from .state import SessionInfo
from .teardown import stop_started_after_close

if TYPE_CHECKING:
    from .handle import SessionHandle
    from .startup import Plan
    from .state import SessionState

__all__ = ["ATTACH_BOUND_S", "attach", "first_request_id"]

ATTACH_BOUND_S: Final = 15.0
"""How long the relay may take to answer once the login is ready (its attach lock waits)."""


def first_request_id() -> int:
    """The first request id of a controller taking a session over: the time in milliseconds.

    An earlier controller's ids started at 1, or at its own (earlier) time; it would need more
    requests than milliseconds passed since to reach ours. Below 2**53, so every JSON reader
    keeps it exact.
    """
    return int(time.time() * 1000)


async def attach(state: SessionState, plan: Plan, tg: anyio.abc.TaskGroup, handle: SessionHandle) -> None:
    """Attach to the session ``handle`` names, as ``plan`` says (its spec runs the attach login).

    :raises RemoteAcpError: the host's refusal (``session_expired``, ``not_owner``,
        ``attached_elsewhere``, ``offset_lost``), or the connection's failure as any ssh start's.
    """
    options, target, spec = state.options, state.target, plan.spec
    if spec.starter is None or not target.remote:
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            "only a session on a host with a reattach window can be attached",
            cause=Cause.MISUSE,
        )
    state.measurement = Measurement(spec.argv, allowed=False, log=state.log)
    async with target.start_slot():
        state.process = process = await spec.starter(spec, stderr_tail_bytes=options.stderr_tail_bytes)
        if state.closing:  # closed while it started: the session's teardown has run without it
            await stop_started_after_close(process)
        process.watch_link(state.inbox)
        state.log.bind(pid=process.pid)
        state.normalizer.pid = process.pid
        conn = state.conn = state.inbox.conn = AgentConnection(
            process,
            state.inbox,
            max_line_bytes=options.max_line_bytes,
            prelude=spec.prelude,
            first_request_id=first_request_id(),
        )
        conn.start(tg, *watch_agent(conn, process, output_drain_ms=options.output_drain_ms))
        hs = Handshake(conn, process, target, drain_ms=options.output_drain_ms, secrets=state.secrets or ())
        if spec.prelude is not None:
            await hs.wait_ready(spec.prelude, spec.prelude.bound_ms or options.read_timeout_ms)
        with anyio.move_on_after(ATTACH_BOUND_S):
            await process.linked.wait()
        if process.exited.is_set() or conn.lost.is_set():
            raise await hs.lost_error()
        if not process.linked.is_set():
            raise RemoteAcpError(
                ErrorKind.RESPONSE_TIMEOUT,
                f"the session's relay on {target.label} did not answer within {ATTACH_BOUND_S:g} s",
                cause=Cause.NO_ANSWER,
            )
    capabilities = state.capabilities = CapabilityRecord(remote=True, measured=False)
    capabilities.lower(Capability.AGENT_VERSION, "an attached session has no handshake of its own")
    state.close_method = handle.close_method
    state.normalizer.session_id = handle.session_id
    state.log.bind(session_id=handle.session_id)
    name, _, version = handle.agent.partition(" ")
    state.info = SessionInfo(
        session_id=handle.session_id,
        pid=process.pid,
        target=target.label,
        workspace=state.workspace,
        agent_name=name,
        agent_version=version,
        obtained="attached",
    )
